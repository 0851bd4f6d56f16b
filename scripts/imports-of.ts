// The imports of a TypeScript file, read by a small tokenizer (comments, strings, template
// literals and regular expressions are skipped properly), not by TypeScript: static, type-only,
// re-exports, side-effect and `import('...')` (in code or in types) all count. scripts/rooms.ts
// checks them.

/** The imports of one file: the specifiers, as written, of every kind of import. */
export function importsOf(source: string): string[] {
  const tokens = tokenize(source);
  const found: string[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (t.kind !== 'id' || (t.text !== 'import' && t.text !== 'export')) continue;
    const before = tokens[i - 1];
    if (before?.kind === 'punct' && before.text === '.') continue; // x.import
    const next = tokens[i + 1];
    if (t.text === 'import' && next?.kind === 'str') {
      found.push(next.text); // import './side-effect.ts'
      continue;
    }
    if (t.text === 'import' && next?.kind === 'punct' && next.text === '(') {
      const arg = tokens[i + 2];
      const after = tokens[i + 3];
      if (arg?.kind === 'str' && after?.kind === 'punct' && (after.text === ')' || after.text === ',')) {
        found.push(arg.text); // import('./lazy.ts'), typeof import('./types.ts')
      }
      continue;
    }
    // import a, { b, type c } from '...'; import type * as d from '...'; export { e } from '...'
    for (let j = i + 1; j < tokens.length && j < i + 400; j++) {
      const u = tokens[j]!;
      if (u.kind === 'id' && u.text === 'from' && tokens[j + 1]?.kind === 'str') {
        found.push(tokens[j + 1]!.text);
        break;
      }
      if (u.kind === 'id' || (u.kind === 'punct' && '{},*'.includes(u.text))) continue;
      break;
    }
  }
  return found;
}

/** What a file exports by name, and what it takes from each module: names, or `*` for all of them. */
export interface Bindings {
  /** Names this file declares and exports (`export function f`, `export { a as b }`). */
  exports: string[];
  /** Names it exports from another module (`export { a as b } from './x.ts'`: b). */
  reexports: string[];
  /** Per specifier, the names taken (imported, or re-exported from it); `*` for a namespace, `export *` or `import()`. */
  takes: { specifier: string; names: string[] | '*' }[];
}

const DECLARES = new Set(['function', 'class', 'const', 'let', 'var', 'interface', 'type', 'enum']);
const SKIPPED_BEFORE_DECLARATION = new Set(['async', 'abstract', 'declare', 'default']);

/** The names between braces starting at tokens[i] (`{`): `a`, `type b`, `c as d` read as `c`, or as `d` where `alias`. */
function namesInBraces(tokens: Token[], i: number, alias: boolean): { names: string[]; end: number } {
  const names: string[] = [];
  let j = i + 1;
  while (j < tokens.length && !(tokens[j]!.kind === 'punct' && tokens[j]!.text === '}')) {
    const group: string[] = [];
    while (
      j < tokens.length &&
      !(tokens[j]!.kind === 'punct' && (tokens[j]!.text === ',' || tokens[j]!.text === '}'))
    ) {
      if (tokens[j]!.kind === 'id' || tokens[j]!.kind === 'str') group.push(tokens[j]!.text);
      j++;
    }
    const words = group[0] === 'type' && group.length > 1 ? group.slice(1) : group;
    const as = words.indexOf('as');
    if (words.length > 0) names.push(as < 0 ? words[0]! : alias ? words[as + 1]! : words[0]!);
    if (tokens[j]?.text === ',') j++;
  }
  return { names, end: j };
}

/** The exports and imports of one file, by name (read by the same tokenizer as importsOf). */
export function bindingsOf(source: string): Bindings {
  const tokens = tokenize(source);
  const exports: string[] = [];
  const reexports: string[] = [];
  const takes: Bindings['takes'] = [];
  const at = (i: number, text: string) => tokens[i]?.text === text;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (t.kind !== 'id' || (t.text !== 'import' && t.text !== 'export') || at(i - 1, '.')) continue;
    if (t.text === 'import' && at(i + 1, '(')) {
      if (tokens[i + 2]?.kind === 'str') takes.push({ specifier: tokens[i + 2]!.text, names: '*' });
      continue;
    }
    if (t.text === 'import' && tokens[i + 1]?.kind === 'str') continue;
    // The statement's tokens up to `from 'x'` (an import or re-export), or its declaration.
    let j = i + 1;
    if (t.text === 'export') {
      while (SKIPPED_BEFORE_DECLARATION.has(tokens[j]?.text ?? '')) j++;
      if (
        tokens[j]?.kind === 'id' &&
        DECLARES.has(tokens[j]!.text) &&
        !(tokens[j]!.text === 'type' && at(j + 1, '{'))
      ) {
        const name = tokens[j + 1];
        if (name?.kind === 'id') exports.push(name.text);
        // `export const a = 1, b = 2`: each name after a comma at the statement's top level.
        if (tokens[j]!.text === 'const' || tokens[j]!.text === 'let') exports.push(...laterDeclarators(tokens, j + 2));
        continue;
      }
    }
    if (at(j, 'type') && !at(j + 1, ',') && !at(j + 1, 'from')) j++;
    const names: string[] = [];
    let star = false;
    for (; j < tokens.length; j++) {
      const u = tokens[j]!;
      if (u.kind === 'punct' && u.text === '{') {
        const inner = namesInBraces(tokens, j, false);
        // `export { a as b }` exports b; `export { a as b } from` takes a.
        const exported = namesInBraces(tokens, j, true).names;
        names.push(...inner.names);
        j = inner.end;
        const from = at(j + 1, 'from') && tokens[j + 2]?.kind === 'str';
        if (t.text === 'export') (from ? reexports : exports).push(...exported);
        continue;
      }
      if (u.kind === 'punct' && u.text === '*') star = true;
      else if (u.kind === 'id' && u.text === 'from' && tokens[j + 1]?.kind === 'str') {
        takes.push({ specifier: tokens[j + 1]!.text, names: star ? '*' : names });
        break;
      } else if (u.kind === 'id' && t.text === 'import' && u.text !== 'as' && u.text !== 'type') {
        // A default import or a namespace's local name: `import a from`, `import * as ns from`.
        if (!star) names.push('default');
      } else if (!(u.kind === 'punct' && u.text === ',') && !(u.kind === 'id')) break;
    }
  }
  return { exports, reexports, takes };
}

/** The names declared after the first in `const a = x, b = y;`, from the token after `a`. */
function laterDeclarators(tokens: Token[], from: number): string[] {
  const names: string[] = [];
  let depth = 0;
  for (let j = from; j < tokens.length; j++) {
    const u = tokens[j]!;
    if (u.kind !== 'punct') continue;
    if ('([{'.includes(u.text)) depth++;
    else if (')]}'.includes(u.text)) depth--;
    else if (u.text === ';' && depth === 0) break;
    else if (u.text === ',' && depth === 0 && tokens[j + 1]?.kind === 'id' && tokens[j + 2]?.text === '=')
      names.push(tokens[j + 1]!.text);
  }
  return names;
}

interface Token {
  kind: 'id' | 'str' | 'punct' | 'other';
  text: string;
}

const REGEX_AFTER_WORD = new Set([
  'return',
  'typeof',
  'case',
  'do',
  'else',
  'in',
  'instanceof',
  'new',
  'void',
  'delete',
  'throw',
  'yield',
  'await',
  'of',
]);

/**
 * Identifiers, punctuation and the values of strings (template literals without `${}` count as
 * strings); comments, regular expressions, numbers and template literals with `${}` are skipped
 * (the code inside `${}` is tokenized).
 */
function tokenize(s: string): Token[] {
  const out: Token[] = [];
  // For each template literal we are inside of the `${}` of: the `{` depth at which it resumes.
  const templates: number[] = [];
  let depth = 0;
  let i = 0;
  const template = (): void => {
    // s[i] is just past a backtick or a `}` closing `${`: read up to the closing backtick or `${`.
    let text = '';
    const whole = s[i - 1] === '`';
    while (i < s.length) {
      const c = s[i]!;
      if (c === '\\') {
        text += s[i + 1] ?? '';
        i += 2;
      } else if (c === '`') {
        i++;
        out.push(whole ? { kind: 'str', text } : { kind: 'other', text: '`' });
        return;
      } else if (c === '$' && s[i + 1] === '{') {
        i += 2;
        templates.push(depth);
        depth++;
        out.push({ kind: 'other', text: '`' });
        return;
      } else {
        text += c;
        i++;
      }
    }
  };
  while (i < s.length) {
    const c = s[i]!;
    if (/\s/.test(c)) {
      i++;
    } else if (c === '/' && s[i + 1] === '/') {
      while (i < s.length && s[i] !== '\n') i++;
    } else if (c === '/' && s[i + 1] === '*') {
      const end = s.indexOf('*/', i + 2);
      i = end < 0 ? s.length : end + 2;
    } else if (c === '"' || c === "'") {
      let text = '';
      i++;
      while (i < s.length && s[i] !== c && s[i] !== '\n') {
        if (s[i] === '\\') {
          text += s[i + 1] ?? '';
          i += 2;
        } else text += s[i++];
      }
      i++;
      out.push({ kind: 'str', text });
    } else if (c === '`') {
      i++;
      template();
    } else if (c === '/' && regexMayStart(out.at(-1))) {
      i++;
      let inClass = false;
      while (i < s.length && s[i] !== '\n') {
        const r = s[i]!;
        if (r === '\\') i++;
        else if (r === '[') inClass = true;
        else if (r === ']') inClass = false;
        else if (r === '/' && !inClass) break;
        i++;
      }
      i++;
      while (i < s.length && /[a-z]/i.test(s[i]!)) i++;
      out.push({ kind: 'other', text: '/re/' });
    } else if (/[A-Za-z_$]/.test(c)) {
      const start = i;
      while (i < s.length && /[\w$]/.test(s[i]!)) i++;
      out.push({ kind: 'id', text: s.slice(start, i) });
    } else if (/[0-9]/.test(c)) {
      while (i < s.length && /[\w.]/.test(s[i]!)) i++;
      out.push({ kind: 'other', text: '0' });
    } else {
      i++;
      if (c === '{') depth++;
      if (c === '}') {
        depth--;
        if (templates.at(-1) === depth) {
          templates.pop();
          template();
          continue;
        }
      }
      out.push({ kind: 'punct', text: c });
    }
  }
  return out;
}

function regexMayStart(previous: Token | undefined): boolean {
  if (!previous) return true;
  if (previous.kind === 'id') return REGEX_AFTER_WORD.has(previous.text);
  if (previous.kind === 'punct') return previous.text !== ')' && previous.text !== ']';
  return false;
}

/** The npm package a bare specifier names (`@scope/name` or `name`), without any subpath. */
