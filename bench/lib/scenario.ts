/** Settings every scenario receives from `npm run bench`. */
export type BenchOptions = {
  /** The PostgreSQL database; each scenario works in its own throw-away schema there. */
  databaseUrl: string;
  connections: number;
  durationSec: number;
  /** Whether --duration was given: the soak runs longer than the others unless told. */
  durationGiven: boolean;
  warmupSec: number;
  customers: number;
  /** When set, the server runs with --cpu-prof and writes its profile into this folder. */
  cpuProfDir: string | undefined;
};

/** A benchmark module under bench/scenarios: it prints its own table and says whether its checks passed. */
export type Scenario = {
  name: string;
  summary: string;
  /** Resolves to false when a correctness check failed (missed speed targets are reported, not failed). */
  run(options: BenchOptions): Promise<boolean>;
};
