// A TCP proxy between two local processes (a replica and its primary), so a test can cut the
// link: `cut()` drops every connection and refuses new ones, as a network partition would.
// `hold(i)` keeps the server's replies on the i-th connection (in the order they were made) from
// reaching the client until `release(i)`, so a test can make one connection's reply arrive
// after another's, in an order it chooses rather than one it hopes for.
import { connect, createServer, type Server, type Socket } from 'node:net';
import { freePort } from './redis-server.js';

export class TcpProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  /** The server-to-client side of each connection, in the order they were made. */
  private readonly replies: { held: boolean; queued: Buffer[]; to: Socket }[] = [];

  private constructor(
    readonly port: number,
    private readonly target: number,
  ) {}

  static async start(target: number): Promise<TcpProxy> {
    const proxy = new TcpProxy(await freePort(), target);
    await proxy.listen();
    return proxy;
  }

  private listen(): Promise<void> {
    this.server = createServer((inbound) => {
      const outbound = connect(this.target, '127.0.0.1');
      for (const s of [inbound, outbound]) {
        this.sockets.add(s);
        s.on('error', () => {});
        s.on('close', () => {
          this.sockets.delete(s);
          inbound.destroy();
          outbound.destroy();
        });
      }
      inbound.pipe(outbound);
      const link = { held: false, queued: [] as Buffer[], to: inbound };
      this.replies.push(link);
      outbound.on('data', (chunk: Buffer) => {
        if (link.held) link.queued.push(chunk);
        else inbound.write(chunk);
      });
      outbound.on('end', () => inbound.end());
    });
    return new Promise((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
  }

  /** Connections made through the proxy so far. */
  get connections(): number {
    return this.replies.length;
  }

  /** Holds back the server's replies on connection `i` (0: the first made). */
  hold(i: number): void {
    this.link(i).held = true;
  }

  /** Delivers the replies held on connection `i`, in order, and passes later ones on. */
  release(i: number): void {
    const link = this.link(i);
    link.held = false;
    for (const chunk of link.queued.splice(0)) link.to.write(chunk);
  }

  private link(i: number) {
    const link = this.replies[i];
    if (!link) throw new Error(`the proxy has ${this.replies.length} connections, not a connection ${i}`);
    return link;
  }

  /** Drops every connection through the proxy and stops accepting new ones. */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }

  /** Accepts connections again after cut() (on the same port). */
  async heal(): Promise<void> {
    if (!this.server) await this.listen();
  }

  async stop(): Promise<void> {
    await this.cut();
  }
}
