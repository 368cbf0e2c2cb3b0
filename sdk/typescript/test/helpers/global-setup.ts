import type { TestProject } from 'vitest/node';
import { buildParley } from './server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    parleyBin: string;
  }
}

export default function setup(project: TestProject): void {
  project.provide('parleyBin', process.env.PARLEY_BIN || buildParley());
}
