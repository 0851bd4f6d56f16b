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
