"""Issue 15's success-path gaps, round by round, in ns.

Usage: python3 2026-11-30-issue15-gap.py FILE

FILE holds rounds of BenchmarkSuccess rows tagged /v=NAME/ and, from at
least one version, BenchmarkSuccessKeyAllowance rows tagged /v=NAME (see
docs/performance.md, "Issue 15, where it ends"). A round is one run of
one version's test binary; its rows ran back to back, so differences
taken within a round cancel the machine's drift between rounds. For each
version and round:

  GET gap  = (grantretry - bare) - (failsafe - bare)
  POST gap = (grantretry - bare) - (failsafe - bare) - key

where key is the round's SuccessKeyAllowance (the version's own, else the
same round's of another version). The target is met when the gap is at
most 0. Prints the median over rounds and how many rounds met it.
"""
import collections
import re
import statistics
import sys

rows = collections.defaultdict(lambda: collections.defaultdict(dict))  # v -> round -> name -> ns
keys = collections.defaultdict(dict)  # v -> round -> ns
rnd = collections.Counter()
versions = []
for line in open(sys.argv[1]):
    f = line.split()
    if not f:
        continue
    m = re.match(r'BenchmarkSuccess/net=inmem/method=(\w+)/v=([\w-]+)/rt=([\w-]+)-\d+$', f[0])
    k = re.match(r'BenchmarkSuccessKeyAllowance/v=([\w-]+)-\d+$', f[0])
    if m:
        method, v, rt = m.groups()
        if v not in versions:
            versions.append(v)
        if (method, rt) == ('GET', 'bare'):
            rnd[v] += 1
        rows[v][rnd[v]][(method, rt)] = float(f[2])
    elif k:
        keys[k.group(1)][rnd[k.group(1)]] = float(f[2])


def key_for(v, r):
    if r in keys[v]:
        return keys[v][r]
    for other in keys:
        if r in keys[other]:
            return keys[other][r]
    return None


for v in versions:
    print(v)
    for method in ('GET', 'POST'):
        gaps, added, fs, ks = [], [], [], []
        for r, got in sorted(rows[v].items()):
            try:
                g = got[(method, 'grantretry')] - got[(method, 'bare')]
                s = got[(method, 'failsafe')] - got[(method, 'bare')]
            except KeyError:
                continue
            gap = g - s
            if method == 'POST':
                k = key_for(v, r)
                if k is None:
                    continue
                ks.append(k)
                gap -= k
            gaps.append(gap)
            added.append(g)
            fs.append(s)
        if not gaps:
            continue
        met = sum(1 for x in gaps if x <= 0)
        extra = f'  key {statistics.median(ks):4.0f}' if ks else ''
        print(f'  {method:4s} n={len(gaps):2d}  grantretry +{statistics.median(added):5.0f}  '
              f'failsafe +{statistics.median(fs):5.0f}{extra}  gap {statistics.median(gaps):+5.0f}  '
              f'rounds met {met}/{len(gaps)}')
