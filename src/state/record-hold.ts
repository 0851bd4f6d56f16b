// Whether records may be written now. Two reasons hold them: the operator chose to observe first
// (mode observe), or overlays exist and the overlaySelector selects none of them, which on a fresh
// install is most likely a wrong selector: writing then would record overlay-influenced=false on
// every node, and the guard keeps a record as it was written. Held is said loudly (an error log,
// records_held, an alert); when the selector selects again, whoever held a node is told to go on.
import type { Logger } from 'pino';
import type { Gauge } from 'prom-client';
import type { OverlayCache } from './caches.ts';

type HoldReason = 'disabled' | 'observe' | 'no_overlay_selected';

const REASONS: readonly HoldReason[] = ['disabled', 'observe', 'no_overlay_selected'];

/** records_held: 1 for the reason records are held now, 0 for the others (every series there, for alerts to join on). */
export function exportHeld(gauge: Gauge<'reason'>, held: HoldReason | undefined): void {
  for (const reason of REASONS) gauge.set({ reason }, held === reason ? 1 : 0);
}

interface HoldOptions {
  mode: 'record' | 'observe';
  holdWhileNoOverlaySelected: boolean;
  /** For the log line that says why. */
  overlaySelector: string;
}

export class RecordHold {
  private held: HoldReason | undefined;
  private readonly lifted: (() => void)[] = [];
  private readonly overlays: OverlayCache;
  private readonly o: HoldOptions;
  private readonly gauge: Gauge<'reason'>;
  private readonly log: Logger;

  constructor(overlays: OverlayCache, o: HoldOptions, gauge: Gauge<'reason'>, log: Logger) {
    this.overlays = overlays;
    this.o = o;
    this.gauge = gauge;
    this.log = log;
    this.held = o.mode === 'observe' ? 'observe' : undefined;
    exportHeld(gauge, this.held);
    if (o.mode === 'record' && o.holdWhileNoOverlaySelected) overlays.onChange(() => this.reconsider());
  }

  /** Why records are held now; undefined: they may be written. */
  reason(): HoldReason | undefined {
    return this.held;
  }

  /** Called when a hold ends: what it held back may be written now. */
  onLift(listener: () => void): void {
    this.lifted.push(listener);
  }

  private reconsider(): void {
    let seen = 0;
    let selected = 0;
    for (const overlay of this.overlays.current()) {
      seen++;
      if (this.overlays.selects(overlay)) selected++;
    }
    const next: HoldReason | undefined = seen > 0 && selected === 0 ? 'no_overlay_selected' : undefined;
    if (next === this.held) return;
    this.held = next;
    exportHeld(this.gauge, next);
    if (next) {
      this.log.error(
        { overlays: seen, overlaySelector: this.o.overlaySelector },
        "records held: NodeOverlays exist and the overlaySelector selects none of them; nothing is recorded until it does (fix nodeWatcher.overlaySelector, or set holdWhileNoOverlaySelected=false if none of these overlays is Veneer's)",
      );
      return;
    }
    this.log.info('records resume: the overlaySelector selects a NodeOverlay again');
    for (const listener of this.lifted) listener();
  }
}
