#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# Checks the benchmark's own tools, fast and without root: memwalk, hog and floor do the work they claim and
# reject bad input; bench/run's parsers read perf and cyclictest output right; bench/dispatch judges its
# targets from the figures and rewrites only its own section; bench/report.py rewrites
# only its own sections of docs/benchmarks.md and judges the targets from the figures.
# Prints "N passed, N failed, N skipped"; exits 1 on any failure, 77 if the binaries are not built.
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get('RTD_BUILD_DIR', '')
MEMWALK = os.path.join(BUILD, 'bench', 'memwalk')
HOG = os.path.join(BUILD, 'bench', 'hog')
FLOOR = os.path.join(BUILD, 'bench', 'floor')
SPAWN_TIME = os.path.join(BUILD, 'bench', 'spawn-time')
sys.path.insert(0, HERE)
passed = failed = skipped = 0


def check(name, ok, detail=''):
        global passed, failed
        if ok:
                passed += 1
                print(f'ok   {name}')
        else:
                failed += 1
                print(f'FAIL {name} {detail}')


def skip(name, why):
        global skipped
        skipped += 1
        print(f'skip {name}: {why}')


def load_script(name):
        loader = importlib.machinery.SourceFileLoader('bench_' + name, os.path.join(HERE, name))
        spec = importlib.util.spec_from_loader('bench_' + name, loader)
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
        return mod


def memwalk(*args):
        p = subprocess.run([MEMWALK, *args], capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout, p.stderr


def test_memwalk():
        rc, out, err = memwalk('-n', '3000000', '-l', 'one')
        j = json.loads(out) if rc == 0 else {}
        check('memwalk prints one JSON result', rc == 0 and j.get('label') == 'one' and j.get('steps') == 3000000
              and j.get('threads') == 1 and j.get('seconds', 0) > 0, out + err)
        rc2, out2, _ = memwalk('-n', '3000000')
        check('memwalk is deterministic (same checksum twice)', rc2 == 0 and json.loads(out2)['checksum'] == j.get('checksum'))
        # ARRAY_ELEMS steps visit every element exactly once: each holds 1, checksum = sum(k+1)
        n = 5 * 1024 * 1024 // 4
        rc3, out3, _ = memwalk('-n', str(n))
        check('one lap of the stride visits every element once', rc3 == 0 and json.loads(out3)['checksum'] == n * (n + 1) // 2,
              out3)
        rc4, out4, _ = memwalk('-n', '3000000', '-t', '2')
        check('-t 2 walks two arrays', rc4 == 0 and json.loads(out4)['threads'] == 2
              and json.loads(out4)['checksum'] == 2 * j.get('checksum', -1), out4)
        with tempfile.TemporaryDirectory() as td:
                f = os.path.join(td, 'r.json')
                rc5, out5, _ = memwalk('-n', '1000', '-o', f)
                rc5b, _, _ = memwalk('-n', '1000', '-o', f)
                lines = open(f).read().splitlines() if os.path.exists(f) else []
                check('-o appends one line per run, nothing on stdout', rc5 == 0 and rc5b == 0 and out5 == '' and len(lines) == 2)
        for args, word in ((['-n', '0'], '-n STEPS'), (['-t', 'x'], '-t THREADS'), (['-l', 'a"b'], '-l LABEL'),
                           (['extra'], 'unexpected argument')):
                rc, out, err = memwalk(*args)
                check(f'memwalk rejects {args} naming the option', rc == 2 and word in err, err)


def test_hog():
        for args in (['cpu', '-d', '1'], ['mem', '-m', '16M', '-d', '1']):
                p = subprocess.run([HOG, *args], capture_output=True, text=True, timeout=30)
                check(f'hog {" ".join(args)} gets ready and stops by itself', p.returncode == 0 and p.stdout == 'ready\n',
                      p.stdout + p.stderr)
        for args, word in ((['disk'], 'mode'), (['mem', '-m', '3T'], '-m SIZE'), (['cpu', '-d', '0'], '-d SECONDS')):
                p = subprocess.run([HOG, *args], capture_output=True, text=True, timeout=10)
                check(f'hog rejects {args}', p.returncode == 2 and word in p.stderr, p.stderr)


def test_floor():
        """bench/floor's summary is what its gap list says (count, stolen time, max, histogram)."""
        with tempfile.TemporaryDirectory() as d:
                gaps = os.path.join(d, 'gaps')
                p = subprocess.run([FLOOR, '-d', '0.3', '-t', '500', '-g', gaps], capture_output=True, text=True,
                                   timeout=30)
                r = json.loads(p.stdout) if p.returncode == 0 else {}
                with open(gaps) as f:
                        period = int(f.readline())
                        g = [int(line.split()[1]) for line in f]
                ok = (r.get('loops', 0) > 0 and r['period_ns'] == period and r['gaps'] == len(g) and
                      all(x > 500 for x in g) and r['stolen_ns'] == sum(x - period for x in g) and
                      r['max_ns'] == max(g, default=0) and sum(r['hist_log2_ns']) == len(g) and
                      0.29e9 <= r['end_ns'] - r['start_ns'] <= 0.5e9)
                check('floor: the summary adds up from its gaps', ok, p.stdout[:300] + p.stderr)
        for args in (['-t', '0'], ['-d', '0'], ['-d', 'x'], ['extra']):
                p = subprocess.run([FLOOR, *args], capture_output=True, text=True, timeout=10)
                check(f'floor rejects {args}', p.returncode == 2 and 'usage' in p.stderr, p.stderr)


def test_parsers(run):
        with tempfile.TemporaryDirectory() as td:
                h = os.path.join(td, 'h')
                with open(h, 'w') as f:
                        f.write('# Histogram\n')
                        for us in range(0, 100):
                                f.write(f'{us:06d} {(90 if us == 10 else 9 if us == 50 else 0):06d}\n')
                        f.write('# Total: 000000100\n# Min Latencies: 00010\n# Avg Latencies: 00015\n'
                                '# Max Latencies: 00700\n# Histogram Overflows: 00001\n')
                lat = run.parse_hist(h)
                check('histogram percentiles', lat and lat['samples'] == 100 and lat['p50_us'] == 10
                      and lat['p99_us'] == 50 and lat['max_us'] == 700 and lat['p999_us'] == 700, lat)
                c = os.path.join(td, 'c')
                with open(c, 'w') as f:
                        f.write('# started on x\n\n3,,context-switches,100,100.00,,\n0,,cpu-migrations,100,100.00,,\n'
                                '2500.5,msec,task-clock,100,100.00,0.99,CPUs utilized\n')
                v = run.parse_perf_csv(c)
                check('perf stat -x, parsing', v == {'context-switches': 3, 'cpu-migrations': 0, 'task-clock': 2500.5}, v)
        check('cpu list parsing', run.parse_cpulist('0-2,5') == [0, 1, 2, 5])


def synthetic(report):
        """Results where R meets the job targets and misses one jitter target."""
        runs, jit = [], []
        times = {'D': 2.8, 'M': 2.5, 'R': 2.45}
        for load in ('none', 'cpu'):
                for rep in range(3):
                        for cfg in ('D', 'M', 'R'):
                                t = times[cfg] * (3 if cfg == 'D' and load == 'cpu' else 1) + rep * 0.01
                                r = {'config': cfg, 'load': load, 'rep': rep, 'rc': 0, 'memwalk': {'seconds': t},
                                     'perf': {'context-switches': 900 if cfg == 'D' else 1, 'cpu-migrations': 3 if cfg == 'D' else 0}}
                                if cfg == 'R':
                                        r['job'] = {'metrics': {'voluntary_switches': 4, 'involuntary_switches': 1,
                                                                'migrations': 0}}
                                        r['attribution'] = {'intruders_seconds': {'kworker/1:1': 0.001}, 'irqs': {}}
                                runs.append(r)
                for rep in range(2):
                        for cfg, p99 in (('plain', 900), ('M', 60), ('R', 30)):
                                jit.append({'config': cfg, 'load': load, 'rep': rep, 'rc': 0,
                                            'latency': {'buckets': [[20, 98], [p99, 2]], 'samples': 100, 'max_us': p99 * 2,
                                                        'overflows': 0, 'p99_us': p99}})
        meta = {'date': '2026-01-01 00:00 UTC', 'cpu_model': 'Test CPU', 'cpus': 2, 'hypervisor': '', 'caches': {},
                'mem_gib': 1, 'kernel': '6.18', 'kernel_version': '#1', 'debian': '12', 'rtd_version': 'rtd 0',
                'git': 'x', 'perf': 'perf', 'cyclictest': '2.4', 'repeats': 3, 'jitter_seconds': 5,
                'jitter_repeats': 2, 'loads': ['none', 'cpu'], 'configs': ['D', 'M', 'R'], 'command': 'bench/run'}
        return {'meta': meta, 'runs': runs, 'jitter': jit, 'notes': [], 'reserved_cpu': 1,
                'loads': {'none': 'no load', 'cpu': 'load 1'}}


def test_report():
        import report
        res = synthetic(report)
        lines = '\n'.join(report.targets(res))
        check('time target passes when R is within 5%', '**PASS** — R under load 1 (CPU) within 5%' in lines, lines)
        check('context-switch target passes at 1 per run', '**PASS** — R context switches per run ≤ 5 under load 1' in lines)
        check('p99 vs M target misses at 2×', '**MISS** — cyclictest p99 under load 1 (CPU) ≥ 5× lower through rtd than M' in lines)
        check('p99 vs plain target passes at 30×', '**PASS** — cyclictest p99 under load 1 (CPU) ≥ 10× lower through rtd than plain' in lines)
        check('a miss comes with its causes', '### Why targets are missed here' in lines)
        j = report.jitter(res, 'cpu', 'M')
        check('jitter runs are pooled', j['samples'] == 200 and j['p99_us'] == 60 and j['max_us'] == 120, j)
        with tempfile.TemporaryDirectory() as td:
                doc = os.path.join(td, 'benchmarks.md')
                foreign_a = '## BPF overhead\n\nsomeone else\'s table\n\n| a | b |\n'
                foreign_b = '## Dispatch\n\nanother helper\'s text\n'
                with open(doc, 'w') as f:
                        f.write('# Benchmarks\n\n' + foreign_a + '\n## Jitter\n\nold jitter\n\n' + foreign_b)
                rp = os.path.join(td, 'results.json')
                with open(rp, 'w') as f:
                        json.dump(res, f)
                if not shutil.which('gnuplot'):
                        skip('report writes the doc and plots', 'gnuplot is not installed')
                        return
                report.write(rp, doc)
                text = open(doc).read()
                report.write(rp, doc)
                again = open(doc).read()
                check('other sections are kept as they were', foreign_a in text and foreign_b in text)
                check('own sections appear once each', text.count('## Task-manager experiment') == 1
                      and text.count('## Jitter') == 1 and 'old jitter' not in text)
                check('rewriting is idempotent', text == again)
                check('plots are written', all(os.path.getsize(os.path.join(td, 'img', n)) > 1000
                                               for n in (report.IMG_MEMWALK, report.IMG_JITTER)))


def test_spawn_time():
        """bench/spawn-time prints one line of medians per command, in the order given, and fails on a failing
        command rather than timing it."""
        p = subprocess.run([SPAWN_TIME, '5', '/bin/true', '/bin/echo two words'], capture_output=True, text=True)
        lines = [line.split(' ', 4) for line in p.stdout.splitlines()]
        check('spawn-time: a line per command', p.returncode == 0 and [f[4] for f in lines]
              == ['/bin/true', '/bin/echo two words'], p.stdout + p.stderr)
        check('spawn-time: median, p10, p90, min in order and positive',
              all(0 < float(f[3]) <= float(f[1]) <= float(f[0]) <= float(f[2]) for f in lines), p.stdout)
        p = subprocess.run([SPAWN_TIME, '3', '/bin/false'], capture_output=True, text=True)
        check('spawn-time: a failing command fails the run', p.returncode == 1 and not p.stdout, p.stdout)


def test_dispatch_report(dispatch):
        rep = {'byhand_s': 0.002, 'rtctl_s': 0.0019, 'rtctl_start_s': 0.0011, 'exec_floor_s': 0.0009,
               'static_floor_s': 0.001, 'rtctl_spawn_us': 1100, 'static_spawn_us': 1000, 'true_spawn_us': 1150,
               'raw_client_s': 0.0021,
               'dispatch_p50_us': 1200, 'dispatch_p99_us': 2000, 'throughput_per_s': 1400,
               'throughput_tmpfs_per_s': 1300, 'cloop_per_s': 2000, 'exec_to_reap_us': 600,
               'exec_to_reap_tmpfs_us': 590, 'state_fs': 'ext4'}
        rep['ratio'] = rep['throughput_per_s'] / rep['cloop_per_s']
        rep['ratio_tmpfs'] = rep['throughput_tmpfs_per_s'] / rep['cloop_per_s']
        res = dict(rep, cpu=1, priority=50, runs=10, flood=20, repeats=1, host='h', kernel='k', when='w',
                   reps=[rep])
        text = dispatch.report(res)
        rows = {line.split(' | ')[0]: line for line in text.splitlines() if line.startswith('| ')}
        verdict = lambda key: next(v for k, v in rows.items() if key in k)
        check('dispatch: faster than by hand is met', 'no slower than by hand: met' in verdict('rtctl submit'))
        check('dispatch: p50 over 1 ms is missed', '≤ 1 ms: missed' in verdict('p50'))
        check('dispatch: rtctl --version over 1 ms is missed', '≤ 1 ms: missed' in verdict('rtctl --version'))
        check('dispatch: rtctl --version against the static floor and /bin/true',
              '+100 µs from it' in verdict('static-hello') and '-50 µs from it' in verdict('dynamically linked'))
        check('dispatch: 70% of the C loop is met at 70%, missed at 65%',
              'C loop: met (70%' in verdict('state directory on ext4')
              and 'C loop: missed (65%' in verdict('state directory on tmpfs'))
        with tempfile.TemporaryDirectory() as td:
                doc = os.path.join(td, 'benchmarks.md')
                with open(doc, 'w') as f:
                        f.write('# Benchmarks\n\n## Dispatch\nold\n\n## Other\nkept\n')
                dispatch.write_doc(doc, text, 'Dispatch')
                once = open(doc).read()
                dispatch.write_doc(doc, text, 'Dispatch')
                check('dispatch: its section is replaced, others kept, idempotently',
                      'old' not in once and '## Other\nkept' in once and once.count('## Dispatch') == 1
                      and open(doc).read() == once)


def main():
        if not (os.access(MEMWALK, os.X_OK) and os.access(HOG, os.X_OK)):
                print(f'0 passed, 0 failed, 1 skipped (bench/memwalk and bench/hog not built under RTD_BUILD_DIR={BUILD!r})')
                return 77
        test_memwalk()
        test_hog()
        test_floor()
        test_spawn_time()
        test_parsers(load_script('run'))
        test_dispatch_report(load_script('dispatch'))
        test_report()
        print(f'{passed} passed, {failed} failed, {skipped} skipped')
        return 1 if failed else 0


if __name__ == '__main__':
        sys.exit(main())
