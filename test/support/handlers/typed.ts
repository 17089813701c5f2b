// A TypeScript handler file: runs in a sandbox started with execArgv ['--import', 'tsx'].
interface Order {
  qty: number;
  price: number;
}

export default async function total(job: { data: Order }): Promise<number> {
  return job.data.qty * job.data.price;
}
