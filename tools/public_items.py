#!/usr/bin/env python3
"""Count public items in `cargo public-api -sss` listings.

    cargo public-api -p weft -sss > after.txt      # (and at an older commit: before.txt)
    python3 tools/public_items.py before.txt after.txt [-v]


items: modules, structs, enums, unions, traits, free functions, free
constants/statics, free type aliases and macros -- the Rust Reference's
"items". Associated items, variants, fields and trait-impl members are not
items; `pub_lines` counts every `pub` line, all of those included."""
import re, sys

def strip_generics(s):
    out, depth = [], 0
    for c in s:
        if c == '<': depth += 1
        elif c == '>': depth -= 1
        elif depth == 0: out.append(c)
    return ''.join(out)

verbose = '-v' in sys.argv
for path in [a for a in sys.argv[1:] if a != '-v']:
    items, lines = [], 0
    for raw in open(path):
        l = re.sub(r'^(#\[[^\]]*\]\s*)+', '', raw.strip())
        if not l.startswith('pub '):
            continue
        lines += 1
        m = re.match(r'pub (?:async |unsafe |const )*(mod|struct|enum|union|trait|fn|const|static|type|macro) (\S+)', strip_generics(l))
        if not m:
            continue
        kind, p = m.groups()
        p = strip_generics(p).split('(')[0].rstrip(':')
        segs = p.split('::')
        if kind in ('fn', 'const', 'static', 'type') and any(s[:1].isupper() or not s.startswith('weft') and i == 0 for i, s in enumerate(segs[:-1])):
            continue
        items.append(f'{kind} {p}')
    print(f'{path}: items={len(items)} pub_lines={lines}')
    if verbose:
        print('\n'.join(items))
