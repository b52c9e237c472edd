# Per-round ratios of the audit-lines runs: in each round, what JSON audit
# lines add to a GET (grantretry-audit minus grantretry) over one attempt
# line and over zap's two lines, then the median of the rounds. Pairing
# within a round cancels most of the host's drift between rounds.
#   python3 2026-11-30-issue15-audit-ratio.py FILE VARIANT
import re, statistics, sys

path, v = sys.argv[1], sys.argv[2]
rounds, cur = [], {}
for line in open(path):
    m = re.match(r'Benchmark(\S+)-\d+\s+\d+\s+([\d.]+) ns/op', line)
    if not m or f'v={v}/' not in m.group(1):
        continue
    name = m.group(1).replace(f'v={v}/', '')
    if name in cur:
        rounds.append(cur)
        cur = {}
    cur[name] = float(m.group(2))
rounds.append(cur)
get = 'Success/net=inmem/method=GET/rt='
for piece in ('attempt-line', 'success-lines'):
    ratios = [(r[get + 'grantretry-audit'] - r[get + 'grantretry']) / r['Pieces/piece=zap-json-' + piece]
              for r in rounds if 'Pieces/piece=zap-json-' + piece in r]
    if ratios:
        print(f'added / {piece}: median {statistics.median(ratios):.2f} over {len(ratios)} rounds')
