// Just enough CEL to run the webhook's matchConditions in a unit test: string and boolean
// literals, list literals, field and index selection, has(), `in`, `==`, `!=`, `!`, `&&`, `||`,
// the conditional `? :`, the exists() macro (over a list's items or a map's keys) and
// startsWith(), with CEL's error semantics (a missing field or key is an error; `&&` and
// `||` forgive an error when the other side decides). Anything else is a parse error, so a
// condition that outgrows this shape fails its test rather than being evaluated wrongly.

export const ERROR = Symbol('cel error');
type Value = string | boolean | readonly Value[] | { readonly [k: string]: Value } | typeof ERROR;
export type Env = Readonly<Record<string, Value>>;
type Expr = (env: Env) => Value;

const TOKEN = /\s*(?:('(?:[^'\\]|\\.)*')|([A-Za-z_][A-Za-z0-9_]*)|(&&|\|\||==|!=|[!()[\].,?:]))/y;

function tokenize(source: string): string[] {
  const tokens: string[] = [];
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < source.length) {
    if (/^\s*$/.test(source.slice(TOKEN.lastIndex))) break;
    const at = TOKEN.lastIndex;
    const m = TOKEN.exec(source);
    if (!m) throw new Error(`CEL: cannot read ${JSON.stringify(source.slice(at, at + 20))}`);
    tokens.push(m[1] ?? m[2] ?? m[3] ?? '');
  }
  return tokens;
}

const isMap = (v: Value): v is { readonly [k: string]: Value } => typeof v === 'object' && !isList(v);
const isBool = (v: Value): v is boolean => typeof v === 'boolean';
const isList = (v: Value): v is readonly Value[] => Array.isArray(v);

function select(target: Value, key: Value): Value {
  if (target === ERROR || key === ERROR || !isMap(target) || typeof key !== 'string') return ERROR;
  return Object.hasOwn(target, key) ? (target[key] as Value) : ERROR;
}

export function compile(source: string): (env: Env) => Value {
  const tokens = tokenize(source);
  let i = 0;
  const peek = () => tokens[i];
  const take = (want?: string) => {
    const t = tokens[i++];
    if (t === undefined || (want !== undefined && t !== want))
      throw new Error(`CEL: expected ${want ?? 'more'} at token ${i - 1} of ${JSON.stringify(source)}`);
    return t;
  };
  const ident = (t: string | undefined) => t !== undefined && /^[A-Za-z_]/.test(t) && t !== 'in';

  /** `||` and `&&` as CEL has them: commutative, an error absorbed by the operand that decides. */
  function logical(op: '||' | '&&', operand: () => Expr): Expr {
    const decides = op === '||';
    let left = operand();
    while (peek() === op) {
      take();
      const [a, b] = [left, operand()];
      left = (env) => {
        const x: Value = a(env);
        const y: Value = b(env);
        if (x === decides || y === decides) return decides;
        return x === !decides && y === !decides ? !decides : ERROR;
      };
    }
    return left;
  }
  /** `c ? a : b`, below `||`: an error or a non-boolean condition is an error. */
  function conditional(): Expr {
    const condition = or();
    if (peek() !== '?') return condition;
    take();
    const then = conditional();
    take(':');
    const otherwise = conditional();
    return (env) => {
      const c = condition(env);
      return c === true ? then(env) : c === false ? otherwise(env) : ERROR;
    };
  }
  function or(): Expr {
    return logical('||', and);
  }
  function and(): Expr {
    return logical('&&', relation);
  }
  function relation(): Expr {
    const left = unary();
    const op = peek();
    if (op !== 'in' && op !== '==' && op !== '!=') return left;
    take();
    const right = unary();
    return (env) => {
      const x: Value = left(env);
      const y: Value = right(env);
      if (x === ERROR || y === ERROR) return ERROR;
      if (op === 'in') {
        if (typeof x !== 'string') return ERROR;
        if (isMap(y)) return Object.hasOwn(y, x);
        return isList(y) ? y.includes(x) : ERROR;
      }
      if (typeof x !== 'string' || typeof y !== 'string') return ERROR;
      return op === '==' ? x === y : x !== y;
    };
  }
  function unary(): Expr {
    if (peek() !== '!') return member();
    take();
    const operand = unary();
    return (env) => {
      const v = operand(env);
      return isBool(v) ? !v : ERROR;
    };
  }
  function member(): Expr {
    let target = primary();
    for (;;) {
      if (peek() === '.') {
        take();
        const name = take();
        if (!ident(name)) throw new Error(`CEL: bad field ${name}`);
        if (peek() === '(' && name === 'startsWith') {
          take('(');
          const prefix = conditional();
          take(')');
          const t = target;
          target = (env) => {
            const [s, p] = [t(env), prefix(env)];
            return typeof s === 'string' && typeof p === 'string' ? s.startsWith(p) : ERROR;
          };
        } else if (peek() === '(') {
          if (name !== 'exists') throw new Error(`CEL: unsupported method ${name}`);
          take('(');
          const variable = take();
          take(',');
          const predicate = conditional();
          take(')');
          const list = target;
          target = (env) => {
            const range = list(env);
            // Over a map, the macros range over its keys.
            const items = isMap(range) ? Object.keys(range) : range;
            if (!isList(items)) return ERROR;
            let failed = false;
            for (const item of items) {
              const v = predicate({ ...env, [variable]: item });
              if (v === true) return true;
              if (v !== false) failed = true;
            }
            return failed ? ERROR : false;
          };
        } else {
          const t = target;
          target = (env) => select(t(env), name);
        }
      } else if (peek() === '[') {
        take();
        const key = conditional();
        take(']');
        const t = target;
        target = (env) => select(t(env), key(env));
      } else return target;
    }
  }
  function primary(): Expr {
    const t = take();
    if (t.startsWith("'")) {
      const value = t.slice(1, -1).replace(/\\(.)/g, '$1');
      return () => value;
    }
    if (t === 'true' || t === 'false') return () => t === 'true';
    if (t === '(') {
      const inner = conditional();
      take(')');
      return inner;
    }
    if (t === '[') {
      const items: Expr[] = [];
      while (peek() !== ']') {
        items.push(conditional());
        if (peek() === ',') take();
        else break;
      }
      take(']');
      return (env) => {
        const values = items.map((e) => e(env));
        return values.includes(ERROR) ? ERROR : values;
      };
    }
    if (t === 'has') {
      // has() takes a field selection and asks only whether its last field is present.
      take('(');
      const path = [take()];
      while (peek() === '.') {
        take();
        path.push(take());
      }
      take(')');
      if (path.length < 2 || !path.every(ident))
        throw new Error(`CEL: has() needs a field selection, got ${path.join('.')}`);
      const field = path.pop() as string;
      return (env) => {
        const target = path.slice(1).reduce<Value>((v, name) => select(v, name), env[path[0] as string] ?? ERROR);
        return target === ERROR || !isMap(target) ? ERROR : Object.hasOwn(target, field);
      };
    }
    if (ident(t)) return (env) => env[t] ?? ERROR;
    throw new Error(`CEL: unexpected ${t} in ${JSON.stringify(source)}`);
  }

  const expr = conditional();
  if (i !== tokens.length) throw new Error(`CEL: trailing ${tokens.slice(i).join(' ')} in ${JSON.stringify(source)}`);
  return expr;
}

/**
 * Whether the apiserver calls a webhook with these matchConditions: not if any is false; if
 * none is false but one errs, not under failurePolicy Ignore (the chart's).
 */
export function calls(conditions: readonly { expression: string }[], env: Env): boolean {
  const results = conditions.map((c) => compile(c.expression)(env));
  return results.every((r) => r === true);
}
