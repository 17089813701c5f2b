// A TCP proxy between two local processes (a replica and its primary), so a test can cut the
// link: `cut()` drops every connection and refuses new ones, as a network partition would.
import { connect, createServer, type Server, type Socket } from 'node:net';
import { freePort } from './redis-server.js';

export class TcpProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();

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
      outbound.pipe(inbound);
    });
    return new Promise((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
  }

  /** Drops every connection through the proxy and stops accepting new ones. */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }

  async stop(): Promise<void> {
    await this.cut();
  }
}
