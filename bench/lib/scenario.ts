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
  /** Whether --customers was given: the console builds a million customers unless told. */
  customersGiven: boolean;
  /** When set, the server runs with --cpu-prof and writes its profile into this folder. */
  cpuProfDir: string | undefined;
  /** The scale scenario's own settings (bench/scenarios/scale.ts). */
  scale: ScaleSettings;
};

/** The parts of the scale scenario, in the order it runs them. */
export const SCALE_PARTS = ['lists', 'writes', 'purge', 'import'] as const;

export type ScaleSettings = {
  /** Build (or check and migrate) the LARGE and SMALL databases, then stop. */
  buildOnly: boolean;
  /** Build them again even if they are current. */
  rebuild: boolean;
  /** Latency samples per request and size (fewer for a request whose samples take seconds). */
  samples: number;
  /** Measured purges under writes. */
  purgeTurns: number;
  /** Lines of the customers import file; 0 skips the import. */
  importRows: number;
  parts: ReadonlySet<(typeof SCALE_PARTS)[number]>;
};

/** A benchmark module under bench/scenarios: it prints its own table and says whether its checks passed. */
export type Scenario = {
  name: string;
  summary: string;
  /** Resolves to false when a correctness check failed (missed speed targets are reported, not failed). */
  run(options: BenchOptions): Promise<boolean>;
};
