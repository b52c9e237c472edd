"""Added time per round: grantretry and failsafe-go minus bare, in ns.

Usage: python3 2026-11-30-issue15-added.py FILE

FILE holds rounds of Success rows tagged /v=NAME/ (see docs/performance.md,
"Issue 15, the success path"). Within one round a binary's three rows ran
back to back, so differences taken round by round cancel the machine's
drift between rounds; the medians over rounds are printed.
"""
import collections
import re
import statistics
import sys

data = collections.defaultdict(list)
versions = []
for line in open(sys.argv[1]):
    f = line.split()
    m = re.match(r'BenchmarkSuccess/net=inmem/method=(\w+)/v=([\w-]+)/rt=([\w-]+)-\d+$', f[0])
    if not m:
        continue
    method, v, rt = m.groups()
    if v not in versions:
        versions.append(v)
    data[(v, method, rt)].append(float(f[2]))

for method in ('GET', 'POST'):
    print(method)
    for v in versions:
        bare = data[(v, method, 'bare')]
        g = [a - b for a, b in zip(data[(v, method, 'grantretry')], bare)]
        f = [a - b for a, b in zip(data[(v, method, 'failsafe')], bare)]
        d = [a - b for a, b in zip(g, f)]
        print(f'  {v:7s} n={len(g)}  grantretry +{statistics.median(g):5.0f}  '
              f'failsafe +{statistics.median(f):5.0f}  grantretry - failsafe {statistics.median(d):+5.0f}')
