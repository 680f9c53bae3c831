// A real metricsd child process on a throwaway database of the PostgreSQL
// test.sh starts (PG* variables), with API tokens required (metricsd's
// default), for the tests that run under node (the profiler page's, the
// OpenTelemetry exporters'). Ports are chosen by the kernel and read from
// the lines metricsd prints. One instance serves one test file; not shared
// between concurrent users.

import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';

export class Metricsd {
  // metricsd and metricsctl are the binaries' paths; `name` names the
  // database and the tokens; `args` are more metricsd flags.
  constructor({ metricsd, metricsctl, name, args = [] }) {
    this.metricsdPath = metricsd;
    this.metricsctlPath = metricsctl;
    this.name = name;
    this.args = args;
    this.tokenNames = new Map();  // secret -> the name it was created with
  }

  async start() {
    this.db = `${this.name}_${process.pid}`;
    execFileSync('dropdb', ['--if-exists', this.db]);
    execFileSync('createdb', [this.db]);
    this.log = '';
    this.proc = spawn(this.metricsdPath, [
      '--database-url', `dbname=${this.db}`, '--migrate',
      '--http-address', '127.0.0.1:0', '--grpc-address', '127.0.0.1:0', ...this.args,
    ], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc.stderr.on('data', (d) => { this.log += d; });
    this.exited = new Promise((resolve) => this.proc.on('exit', resolve));
    [this.grpcPort, this.port] = await new Promise((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`metricsd did not start: ${this.log}`)), 30000);
      this.proc.stdout.on('data', (d) => {
        out += d;
        const grpc = out.match(/gRPC listening on 127\.0\.0\.1:(\d+)/);
        const http = out.match(/HTTP listening on http:\/\/127\.0\.0\.1:(\d+)/);
        if (grpc && http) {
          clearTimeout(timer);
          resolve([Number(grpc[1]), Number(http[1])]);
        }
      });
      this.proc.on('exit', (code) => reject(new Error(`metricsd exited ${code}: ${this.log}`)));
    });
    this.base = `http://127.0.0.1:${this.port}`;
    this.adminToken = this.createToken('admin');
  }

  // A new token from metricsctl (its last line of output); returns it.
  // `trial` binds a reporter token to its trial.
  createToken(role, trial) {
    const name = `${this.name} ${role} ${this.tokenNames.size}`;
    const out = execFileSync(this.metricsctlPath, ['tokens', 'create', `--role=${role}`,
      `--name=${name}`, ...(trial === undefined ? [] : [`--trial=${trial}`]),
      '--database-url', `dbname=${this.db}`], { encoding: 'utf8' });
    const secret = out.trim().split('\n').pop();
    this.tokenNames.set(secret, name);
    return secret;
  }

  revokeToken(secret) {
    const list = execFileSync(this.metricsctlPath, ['tokens', 'list', '--database-url',
      `dbname=${this.db}`], { encoding: 'utf8' });
    const line = list.split('\n').find((l) => l.includes(this.tokenNames.get(secret)));
    execFileSync(this.metricsctlPath, ['tokens', 'revoke', line.trim().split(/\s+/)[0],
      '--database-url', `dbname=${this.db}`]);
  }

  async stop() {
    if (this.proc.exitCode === null) {
      this.proc.kill('SIGTERM');
      await this.exited;
    }
  }

  dropDatabase() {
    execFileSync('dropdb', ['--if-exists', this.db]);
  }

  // A REST call with the admin token; its JSON answer (asserted 2xx). A
  // call refused for load (429: seeding a week in seconds outruns the
  // sealer, which then refuses the agent for a moment) is made again after
  // the Retry-After it names, for up to a minute, as a bulk importer must.
  async call(method, route, body) {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const response = await fetch(this.base + route, {
        method,
        headers: { Authorization: `Bearer ${this.adminToken}` },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await response.text();
      if (response.status === 429 && Date.now() < deadline) {
        const seconds = Number(response.headers.get('retry-after')) || 1;
        await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
        continue;
      }
      assert.ok(response.ok, `${method} ${route}: ${response.status} ${text}`);
      return JSON.parse(text);
    }
  }
}
