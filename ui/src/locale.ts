// Some web views report the process's POSIX locale as the page's language: WebKitGTK
// under `LANG=C` gives `navigator.language === "C"`, which is no BCP 47 tag, and any
// library that hands it to `Intl` (uPlot does, when its module loads) throws a
// RangeError that stops the whole page. Imported first by main.tsx: when the language
// is not a tag `Intl` accepts, the page reads `en-US` instead.

function valid(tag: string | undefined): boolean {
  if (!tag) return false;
  try {
    return Intl.getCanonicalLocales(tag).length > 0;
  } catch {
    return false;
  }
}

if (typeof navigator !== 'undefined' && !valid(navigator.language)) {
  const languages = (navigator.languages ?? []).filter(valid);
  const language = languages[0] ?? 'en-US';
  try {
    Object.defineProperty(navigator, 'language', { value: language, configurable: true });
    Object.defineProperty(navigator, 'languages', {
      value: languages.length ? languages : [language],
      configurable: true,
    });
  } catch {
    // A browser that refuses: it also reported a valid language, so nothing to mend.
  }
}

export {};
