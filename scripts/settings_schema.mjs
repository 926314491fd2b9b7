// Regenerates crates/engine/src/config/settings_schema.json from the pinned reference
// gateway (the Claude Code binary in tests/e2e/node_modules/claude-gateway-reference):
// the settings schema the reference compiles managed `cli` / `code` / `settings` blocks
// with, read out of the binary by running the binary's own JavaScript, not by hand.
//
// The binary is a Bun standalone executable: its JavaScript modules sit in a module graph
// at the end of the file (`\n---- Bun! ----\n` trailer). This script
//   1. copies every module out (imports of `/$bunfs/root/x.js` rewritten to `./x.js`),
//   2. finds the gateway module (the one that says "unknown settings key") and in it the
//      schema it validates with: `<lazy>(()=>SCHEMA(ARGS(),{strictPolicyHelperKeys:!0}))`,
//   3. imports the module that exports SCHEMA and ARGS and builds that schema,
//   4. walks the schema objects (`.type` names every node: object, optional, string, ...)
//      into the JSON Schema subset settings_schema.rs reads, widened wherever the
//      reference's own parser (`safeParse`, asked with one sample value of each JSON type)
//      takes a value the translation would refuse (coercions, preprocessing),
//   5. asks the gateway's own extra checks (allowed providers, crossSessionInbound,
//      strictPluginOnlyCustomization) for their accepted values by calling them.
//
// Run it with Bun (the modules use `using` declarations Node 20 cannot parse):
//   (cd /tmp && npm install --no-save bun@1.3.14)   # once; any Bun 1.3 will do
//   /tmp/node_modules/.bin/bun scripts/settings_schema.mjs [path/to/claude] > crates/engine/src/config/settings_schema.json
// (about two seconds), then run `cargo nextest run -p gatehouse-engine config::` and the
// config corpus. Not run by scripts/setup.sh: it needs Bun, which the build does not.
// tests/tests/integration/settings_keys.rs reads the key set out of the binary on every
// test run and fails when the pinned reference knows a key the JSON file does not: that is
// the signal to run this script after moving the pin.
//
// What cannot be carried over: the schema's custom refinements (`refine`, `superRefine`,
// `check`: code, not data). The ones the gateway's verdicts depend on are written in Rust
// (config/managed_mcp.rs: the managedMcpServers entry rules; config/managed_policy_helpers.rs:
// the policyHelpers entry rule). One shape is read as data: "exactly one of these keys".

import { readFileSync, writeFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { join, dirname } from "node:path";
import { tmpdir } from "node:os";

const here = dirname(new URL(import.meta.url).pathname);
const binary =
  process.argv[2] ??
  join(here, "../tests/e2e/node_modules/claude-gateway-reference/claude");

/** Every module of the Bun module graph: [name, contents]. */
function modules(bytes) {
  const trailer = Buffer.from("\n---- Bun! ----\n");
  const t = bytes.lastIndexOf(trailer);
  if (t < 0) throw new Error(`${binary}: no Bun module graph`);
  const v = new DataView(bytes.buffer, bytes.byteOffset + t - 32, 32);
  const byteCount = Number(v.getBigUint64(0, true));
  const [listAt, listLen] = [v.getUint32(8, true), v.getUint32(12, true)];
  const base = t - byteCount - 32;
  const slice = (o, l) => bytes.subarray(base + o, base + o + l);
  const out = [];
  const rec = new DataView(bytes.buffer, bytes.byteOffset + base + listAt, listLen);
  for (let r = 0; r + 52 <= listLen; r += 52) {
    const name = slice(rec.getUint32(r, true), rec.getUint32(r + 4, true)).toString();
    const body = slice(rec.getUint32(r + 8, true), rec.getUint32(r + 12, true));
    if (name.startsWith("/$bunfs/root/") && name.endsWith(".js")) out.push([name.slice(13), body]);
  }
  if (out.length === 0) throw new Error(`${binary}: the module list is empty (Bun layout changed?)`);
  return out;
}

function unpack() {
  const dir = mkdtempSync(join(tmpdir(), "gatehouse-settings-schema-"));
  let gateway = null;
  for (const [name, body] of modules(readFileSync(binary))) {
    const text = body.toString("utf8").replaceAll('"/$bunfs/root/', '"./');
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), text);
    if (text.includes("unknown settings key") && text.includes("strictPolicyHelperKeys:!0")) gateway = [name, text];
  }
  if (!gateway) throw new Error("no module validates managed settings (\"unknown settings key\")");
  return { dir, gateway };
}

/** The module and export names of the schema builder, its argument, and the checks. */
function locate(gatewayText) {
  const m = gatewayText.match(/=\w+\(\(\)=>([\w$]+)\(([\w$]+)\(\),\{strictPolicyHelperKeys:!0\}\)\)/);
  if (!m) throw new Error("the gateway module no longer builds its schema as SCHEMA(ARGS(),{strictPolicyHelperKeys:!0})");
  const source = (name) => {
    const imp = [...gatewayText.matchAll(/import\{([^}]*)\}from"([^"]+)"/g)].find(([, names]) =>
      names.split(",").some((n) => n.trim() === name || n.trim().endsWith(` as ${name}`)),
    );
    if (!imp) throw new Error(`${name} is not imported by the gateway module`);
    const entry = imp[1].split(",").map((n) => n.trim()).find((n) => n === name || n.endsWith(` as ${name}`));
    return { from: imp[2], exported: entry.split(" as ")[0] };
  };
  const checks = {};
  for (const [key, re] of [
    ["crossSessionInbound", /let ([\w$]+)=([\w$]+)\(e\);if\(\1!==void 0\)o\.push\(`  crossSessionInbound:/],
    ["strictPluginOnlyCustomization", /let ([\w$]+)=([\w$]+)\(e\);if\(\1!==void 0\)o\.push\(`  strictPluginOnlyCustomization:/],
    ["allowedProviders", /let ([\w$]+)=([\w$]+)\(e\);if\(\1!==void 0\)o\.push\(`  allowedProviders:/],
  ]) {
    const c = gatewayText.match(re);
    if (!c) throw new Error(`the gateway module no longer checks ${key} on its own`);
    checks[key] = source(c[2]);
  }
  return { schema: source(m[1]), args: source(m[2]), checks };
}

const unknownKinds = new Map();
function note(kind, where) {
  if (!unknownKinds.has(kind)) unknownKinds.set(kind, where);
}

/** One check of a string, number or array node into JSON Schema words. */
function applyRules(node, out, where) {
  for (const c of node.checks ?? []) {
    const r = c.rule ?? {};
    switch (r.kind) {
      case "integer":
        out.type = "integer";
        break;
      case "above":
        out[r.inclusive ? "minimum" : "exclusiveMinimum"] = r.bound;
        break;
      case "below":
        out[r.inclusive ? "maximum" : "exclusiveMaximum"] = r.bound;
        break;
      case "length":
      case "min_length":
      case "max_length":
        if (Number.isFinite(r.minimum)) out[out.type === "array" ? "minItems" : "minLength"] = r.minimum;
        if (Number.isFinite(r.maximum)) out[out.type === "array" ? "maxItems" : "maxLength"] = r.maximum;
        break;
      case "format":
        // regex, starts_with, ...: every one carries the RegExp it tests with.
        if (r.pattern instanceof RegExp && r.pattern.flags === "") out.pattern = r.pattern.source;
        else note(`format ${r.format}`, where);
        break;
      case "url":
        out.format = "url";
        break;
      case "refine":
      case "superRefine":
      case "custom":
        // Custom code: not data. The refinements the gateway depends on are listed in
        // settings_schema.rs's module doc as what it does not check.
        break;
      case "length_equals":
        out[out.type === "array" ? "minItems" : "minLength"] = r.length;
        out[out.type === "array" ? "maxItems" : "maxLength"] = r.length;
        break;
      default:
        note(`rule ${r.kind}`, where);
    }
  }
  return out;
}

const isOptional = (node) => node?.optin === "optional";
const endsInTransform = (node) =>
  node?.type === "transform" || (node?.type === "pipe" && endsInTransform(node.out));

/** Whether a translated schema takes `v` at its top level (its type, enum or const). */
function takes(schema, v) {
  if (schema.anyOf) return schema.anyOf.some((x) => takes(x, v));
  if (schema.allOf) return schema.allOf.every((x) => takes(x, v));
  if (schema.enum) return schema.enum.some((x) => JSON.stringify(x) === JSON.stringify(v));
  if ("const" in schema) return JSON.stringify(schema.const) === JSON.stringify(v);
  const kind = v === null ? "null" : Array.isArray(v) ? "array" : typeof v;
  if (schema.type === "integer") return Number.isInteger(v);
  return schema.type === undefined || schema.type === kind;
}

/** `ok(sample)` for a node that may throw on a sample. */
const tryParse = (node, v) => {
  try {
    return node.safeParse(v).success;
  } catch {
    return false;
  }
};

/**
 * The translation, widened by every JSON type the reference's parser takes there and
 * the translation would refuse (values the schema library coerces, records that convert
 * their values): the reference's own parser is asked, sample by sample.
 */
function widened(node, schema, probe = (v) => tryParse(node, v)) {
  const extra = SAMPLES.filter(([, v]) => probe(v) && !takes(schema, v)).map(([t]) => ({ type: t }));
  if (extra.length === 0) return schema;
  return schema.anyOf ? { anyOf: [...schema.anyOf, ...extra] } : { anyOf: [schema, ...extra] };
}

function walk(node, where, depth = 0) {
  if (depth > 40) return {};
  return widened(node, translate(node, where, depth));
}

function translate(node, where, depth) {
  const kind = node?.type;
  switch (kind) {
    case "string":
      return applyRules(node, { type: "string" }, where);
    case "number":
      return applyRules(node, { type: "number" }, where);
    case "boolean":
      return { type: "boolean" };
    case "null":
      return { type: "null" };
    case "undefined":
    case "never":
      // No JSON value is undefined: an option no value takes.
      return { enum: [] };
    case "unknown":
    case "any":
    case "catch":
    case "transform":
      return {};
    case "optional":
    case "default":
    case "prefault":
    case "readonly":
      return walk(node.innerType, where, depth + 1);
    case "nullable":
      return { anyOf: [walk(node.innerType, where, depth + 1), { type: "null" }] };
    case "lazy":
      return walk(node.getter(), where, depth + 1);
    case "pipe":
      // A preprocess (transform into a schema) is read through its schema; a schema
      // followed by a transform is read through the schema.
      // Otherwise both sides check the value, the second only when the first passed.
      // When the first side ends in a transform, the second sees its output, not the
      // value as written: only the first side is read.
      if (node.in?.type === "transform") return preprocessed(node, where, depth);
      if (endsInTransform(node.in) || node.out?.type === "transform") return walk(node.in, where, depth + 1);
      return { allOf: [walk(node.in, where, depth + 1), walk(node.out, where, depth + 1)] };
    case "literal": {
      const values = node.values ?? [];
      return values.length === 1 ? { const: values[0] } : { enum: values };
    }
    case "enum":
      return { enum: [...node.options] };
    case "array":
    {
      const items = widened(node, walk(node.element, `${where}[]`, depth + 1), (v) => tryParse(node, [v]));
      return applyRules(node, { type: "array", items }, where);
    }
    case "record":
      return record(node, where, depth);
    case "object":
      return object(node, where, depth);
    case "union":
      return union(node, where, depth);
    default:
      note(kind, where);
      return {};
  }
}

/** One value of each JSON type, for asking a preprocessed schema what it takes. */
const SAMPLES = [
  ["boolean", true],
  ["number", 1],
  ["string", "x"],
  ["null", null],
  ["array", []],
  ["object", {}],
];

/** A preprocess (a transform, then a schema): read through the schema (`walk` widens it
 * by what the transform turns into something the schema takes). */
function preprocessed(node, where, depth) {
  return walk(node.out, where, depth + 1);
}

function record(node, where, depth) {
  const value = widened(node, walk(node.valueType, `${where}.*`, depth + 1), (v) => tryParse(node, { k: v }));
  if (node.keyType?.type === "enum") {
    const keys = [...node.keyType.options];
    return {
      type: "object",
      properties: Object.fromEntries(keys.map((k) => [k, value])),
      ...(node.isPartial ? {} : { required: keys }),
      additionalProperties: false,
    };
  }
  return { type: "object", additionalProperties: value };
}

function object(node, where, depth) {
  const given = node.given ?? {};
  const properties = {};
  const required = [];
  const open = tryParse(node, {});
  for (const [k, child] of Object.entries(given)) {
    const own = walk(child, `${where}.${k}`, depth + 1);
    properties[k] = open ? widened(node, own, (v) => tryParse(node, { [k]: v })) : own;
    if (!isOptional(child)) required.push(k);
  }
  const out = { type: "object", properties };
  if (required.length > 0) out.required = required;
  const one = exactlyOne(node);
  if (one) out.exactlyOneOf = one;
  const others = node.others?.type;
  if (others === "never") out.additionalProperties = false;
  else if (others && others !== "unknown" && others !== "any") out.additionalProperties = walk(node.others, `${where}.*`, depth + 1);
  return out;
}

/**
 * The one refinement shape read as data: "exactly one of these keys is set"
 * (`(e)=>F([e.a!==void 0,e.b!==void 0],Boolean)===1`, allowed/deniedMcpServers entries).
 */
function exactlyOne(node) {
  for (const c of node.checks ?? []) {
    const text = c.rule?.kind === "refine" ? String(c.rule.accepts) : "";
    const m = text.match(/^\(\w+\)=>\w+\(\[((?:\w+\.\w+!==void 0,?)+)\],Boolean\)===1$/);
    if (m) return m[1].split(",").map((t) => t.split(".")[1].replace("!==void 0", ""));
  }
  return null;
}

function union(node, where, depth) {
  const options = node.options ?? [];
  const tag = node.discriminator;
  if (tag) {
    const variants = {};
    for (const o of options) {
      const t = o.given?.[tag];
      const values = t?.type === "literal" ? t.values : t?.type === "enum" ? [...t.options] : [];
      for (const v of values) variants[v] = walk(o, where, depth + 1);
    }
    if (Object.keys(variants).length === options.length) return { type: "object", discriminator: tag, variants };
  }
  return { anyOf: options.map((o) => walk(o, where, depth + 1)) };
}

/** The accepted values of the gateway's own checks, asked of the checks themselves. */
function extraChecks(checks) {
  const out = {};
  // allowedProviders: "unknown provider name "x"; known names: a, b, c"
  const providers = checks.allowedProviders({ allowedProviders: ["\u0000"] });
  const known = providers?.match(/known names: (.*)$/)?.[1];
  if (!known) throw new Error(`the allowedProviders check answered ${providers}`);
  out.allowedProviders = { type: "array", items: { enum: known.split(", ") } };
  // crossSessionInbound: 'must be one of "a", "b"; received ...'
  const cross = checks.crossSessionInbound({ crossSessionInbound: 5 });
  const values = cross?.match(/must be one of (.*?); received/)?.[1];
  if (!values) throw new Error(`the crossSessionInbound check answered ${cross}`);
  out.crossSessionInbound = { enum: JSON.parse(`[${values}]`) };
  // strictPluginOnlyCustomization: true, false, null or an array (its entries are read leniently).
  const probe = (v) => checks.strictPluginOnlyCustomization({ strictPluginOnlyCustomization: v }) === undefined;
  if (!probe(true) || !probe(null) || !probe(["x", 1]) || probe("x") || probe(1) || probe({})) {
    throw new Error("the strictPluginOnlyCustomization check changed what it accepts");
  }
  out.strictPluginOnlyCustomization = { anyOf: [{ type: "boolean" }, { type: "null" }, { type: "array" }] };
  return out;
}

async function main() {
  const { dir, gateway } = unpack();
  const at = locate(gateway[1]);
  const load = async ({ from, exported }) => (await import(join(dir, from)))[exported];
  const build = await load(at.schema);
  const args = await load(at.args);
  const top = build(args(), { strictPolicyHelperKeys: true });
  const schemaModule = readFileSync(join(dir, at.schema.from), "utf8");
  const aliasList = schemaModule.match(/for\(let\{alias:[\w$]+,canonical:[\w$]+\}of ([\w$]+)\)/)?.[1];
  if (!aliasList) throw new Error("the alias table is gone from the settings module");
  const aliases = (await import(join(dir, at.schema.from)))[aliasList];
  if (!Array.isArray(aliases)) throw new Error(`${aliasList} is not exported as the alias table`);
  const version = readFileSync(join(dir, gateway[0]), "utf8").match(/\/\/ Version: ([\d.]+)/)?.[1] ?? "unknown";

  const schema = walk(top, "");
  const extra = {};
  for (const [k, v] of Object.entries(at.checks)) extra[k] = await load(v);
  Object.assign(schema.properties, extraChecks(extra));
  if (unknownKinds.size > 0) {
    const list = [...unknownKinds].map(([k, w]) => `${k} (at ${w})`).join(", ");
    throw new Error(`schema nodes this script cannot translate: ${list}`);
  }
  schema.properties = Object.fromEntries(Object.entries(schema.properties).sort(([a], [b]) => a.localeCompare(b)));
  delete schema.required;
  const doc = {
    about: `Claude Code's settings schema for managed settings, generated by scripts/settings_schema.mjs from the pinned reference gateway (Claude Code ${version}): the schema its gateway compiles managed cli/code/settings blocks with, plus the gateway's own checks of allowedProviders, crossSessionInbound and strictPluginOnlyCustomization. Do not edit by hand. A JSON Schema subset read by config/settings_schema.rs: type, enum, const, minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength, minItems, maxItems, items, properties, required, exactlyOneOf, additionalProperties, anyOf, allOf (each in turn, until one fails), pattern, format (url), and discriminator + variants (a union chosen by one key). {} accepts any value (values Claude Code drops instead of refusing, transforms).`,
    claude_code_version: version,
    aliases: aliases.map(({ alias, canonical }) => ({ alias, canonical })),
    schema,
  };
  rmSync(dir, { recursive: true, force: true });
  process.stdout.write(`${JSON.stringify(doc, null, 1)}\n`);
}

await main();
