// Versions of named objects (overlays, NodePools), each in force from `from` until `to`, so
// that a launch is judged with what was in force at its time.

export interface Version {
  readonly from: number;
  to: number | undefined;
}

export class VersionHistory<V extends Version> extends Map<string, V[]> {
  /** The version still in force, if any. */
  open(name: string): V | undefined {
    const last = this.get(name)?.at(-1);
    return last && last.to === undefined ? last : undefined;
  }

  /** How many names have a version in force. */
  get inForce(): number {
    let n = 0;
    for (const name of this.keys()) if (this.open(name)) n++;
    return n;
  }

  /** Ends the version in force, as seen deleted at `at`. */
  end(name: string, at: number): void {
    const open = this.open(name);
    if (open) open.to = Math.max(open.from, at);
  }

  /** A full list taken at `at`: whatever it lacks went away unseen, at the latest by `at`. */
  endAllBut(present: ReadonlySet<string>, at: number): void {
    for (const name of this.keys()) if (!present.has(name)) this.end(name, at);
  }
}
