// The suite's CLI (`npx server-conformance-tests --run <url>`) starts vitest in this directory with
// the runner's path as a filter, but vitest 4 only runs files its include patterns match and skips
// node_modules: name the runner explicitly so the published CLI finds its own test file.
// testTimeout: the suite's default 5 s per test assumes a fast server; `sluice local` on a shared
// 2-core machine (moto behind every call) answers in 0.2-1.5 s per request, and tests make up to
// dozens of requests. Timeouts the suite sets itself (long-poll, SSE reads) are unchanged.
import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["node_modules/@durable-streams/server-conformance-tests/dist/test-runner.js"],
    exclude: [],
    testTimeout: 30_000,
  },
})
