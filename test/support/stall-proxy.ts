// A TCP proxy in front of the apiserver that can stall: the connections open at that moment
// stay open and silent, with no error and no FIN, as when a NAT or load balancer drops its state.
// New connections pass. This is the fault a watch cannot see by itself.
import { connect, createServer, type Server, type Socket } from 'node:net';

export class StallProxy {
  private readonly server: Server;
  private readonly pairs = new Set<[Socket, Socket]>();
  private readonly silent = new Set<[Socket, Socket]>();
  /** Connections silenced so far. */
  stalled = 0;
  /** Connections accepted so far. */
  accepted = 0;

  constructor(targetPort: number) {
    this.server = createServer((client) => {
      this.accepted++;
      const upstream = connect(targetPort, '127.0.0.1');
      const pair: [Socket, Socket] = [client, upstream];
      this.pairs.add(pair);
      client.pipe(upstream);
      upstream.pipe(client);
      const end = () => {
        this.pairs.delete(pair);
        client.destroy();
        upstream.destroy();
      };
      client.on('error', end).on('close', end);
      upstream.on('error', end).on('close', end);
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    return (this.server.address() as { port: number }).port;
  }

  /** Every connection open now goes silent for good; the sockets stay open. */
  stall(): void {
    for (const pair of this.pairs) {
      for (const s of pair) {
        s.unpipe();
        s.pause();
      }
      this.stalled++;
      this.pairs.delete(pair);
      this.silent.add(pair);
    }
  }

  async close(): Promise<void> {
    for (const pair of [...this.pairs, ...this.silent]) for (const s of pair) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
