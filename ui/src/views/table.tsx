// Sortable tables: a column header is a button that sorts by it (again: the other way),
// with `aria-sort` on the header so assistive technology says how the table is sorted.

import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';

export type SortDir = 'ascending' | 'descending';
export type Sort<K extends string> = { key: K; dir: SortDir };
export type SortValue = string | number | null | undefined;

/** The rows sorted by one column; empty values (null, undefined) always last. */
export function sortRows<T, K extends string>(rows: T[], sort: Sort<K>, value: (row: T, key: K) => SortValue): T[] {
  const sign = sort.dir === 'ascending' ? 1 : -1;
  return rows
    .map((row, i) => ({ row, i, v: value(row, sort.key) }))
    .sort((a, b) => {
      const an = a.v === null || a.v === undefined;
      const bn = b.v === null || b.v === undefined;
      if (an || bn) return an === bn ? a.i - b.i : an ? 1 : -1;
      const c =
        typeof a.v === 'number' && typeof b.v === 'number'
          ? a.v - b.v
          : String(a.v).localeCompare(String(b.v), undefined, { sensitivity: 'base', numeric: true });
      return c === 0 ? a.i - b.i : sign * c;
    })
    .map((x) => x.row);
}

/** Sort state; a new column starts descending for numbers and times, ascending for text. */
export function useSort<K extends string>(initial: Sort<K>, textKeys: readonly K[] = []) {
  const [sort, setSort] = useState<Sort<K>>(initial);
  const toggle = (key: K) =>
    setSort((s) =>
      s.key === key
        ? { key, dir: s.dir === 'ascending' ? 'descending' : 'ascending' }
        : { key, dir: textKeys.includes(key) ? 'ascending' : 'descending' },
    );
  return { sort, toggle };
}

export function SortHeader<K extends string>({
  id,
  sort,
  toggle,
  num,
  title,
  children,
}: {
  id: K;
  sort: Sort<K>;
  toggle: (k: K) => void;
  num?: boolean;
  title?: string;
  children: ComponentChildren;
}) {
  const active = sort.key === id;
  return (
    <th scope="col" class={num ? 'num' : undefined} aria-sort={active ? sort.dir : 'none'} title={title}>
      <button type="button" class="sort" data-testid={`sort-${id}`} onClick={() => toggle(id)}>
        {children}
        <span class="sort-mark" aria-hidden="true">
          {active ? (sort.dir === 'ascending' ? '▲' : '▼') : ''}
        </span>
      </button>
    </th>
  );
}
