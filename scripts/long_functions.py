#!/usr/bin/env python3
# Functions longer than N lines (default 80), found by matching braces after stripping comments
# and string literals; prints "LINES FILE:LINE SIGNATURE", longest last.
# Usage: python3 scripts/long_functions.py [-nN] [--check] [FILE...]
#   (default: every .cpp/.hpp under core, cli, exec, calibrate and gui)
# The architecture issue keeps core free of functions over ~80 lines (docs/architecture.md), or
# says why beside each: --check (ctest `long_functions`) fails on a function of core/ over the
# limit without a comment line starting "long:" among the three lines above its signature.
import pathlib
import re
import sys


def strip(src):
    """The source with comments and string/char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith('//', i):
            j = src.find('\n', i)
            j = n if j < 0 else j
        elif src.startswith('/*', i):
            j = src.find('*/', i + 2)
            j = n if j < 0 else j + 2
        elif src.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', src[i:])
            j = src.find(')' + m.group(1) + '"', i)
            j = n if j < 0 else j + len(m.group(1)) + 2
        elif c == '\'' and i > 0 and src[i - 1].isalnum() and i + 1 < n and src[i + 1].isalnum():
            j = i + 1  # a digit separator (1'000)
        elif src.startswith('#', i) and (i == 0 or src[i - 1] == '\n'):
            j = src.find('\n', i)  # a preprocessor line
            j = n if j < 0 else j
        elif c in '"\'':
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == '\\' else 1
            j += 1
        else:
            out.append(c)
            i += 1
            continue
        out.append(re.sub(r'[^\n]', ' ', src[i:j]))
        i = j
    return ''.join(out)


def long_functions(path, limit):
    s = strip(pathlib.Path(path).read_text())
    stack, head_start, line, found = [], 0, 1, []
    for i, c in enumerate(s):
        if c == '\n':
            line += 1
        elif c == '{':
            head = s[head_start:i]
            # A function body: a '(' before the brace, not inside another function, and not a
            # namespace, class, enum or initializer.
            is_fn = (not any(k == 'fn' for k, _, _ in stack) and '(' in head
                     and not re.search(r'\b(namespace|struct|class|enum|union)\b[^(]*$', head)
                     and not head.strip().endswith('='))
            lead = len(head) - len(head.lstrip())
            start = s[:head_start + lead].count('\n') + 1
            stack.append(('fn' if is_fn else 'block', start, head.strip().split('\n')[0][:70]))
            head_start = i + 1
        elif c == '}':
            if stack:
                kind, start, sig = stack.pop()
                if kind == 'fn' and line - start + 1 > limit:
                    found.append((line - start + 1, f'{path}:{start}', sig))
            head_start = i + 1
        elif c == ';':
            head_start = i + 1
    return found


def has_reason(path, line):
    """Whether one of the three lines above `line` (1-based) is a comment starting 'long:'."""
    lines = pathlib.Path(path).read_text().split('\n')
    return any(re.match(r'\s*//\s*long:', lines[i]) for i in range(max(0, line - 4), line - 1))


def main():
    args, limit, check = sys.argv[1:], 80, False
    if args and args[0].startswith('-n'):
        limit, args = int(args[0][2:]), args[1:]
    if args and args[0] == '--check':
        check, args = True, args[1:]
    if not args:
        root = pathlib.Path(__file__).resolve().parent.parent
        args = [str(p.relative_to(root)) for d in ('core', 'cli', 'exec', 'calibrate', 'gui')
                for p in sorted((root / d).rglob('*')) if p.suffix in ('.cpp', '.hpp')]
        import os
        os.chdir(root)
    found = [f for p in args for f in long_functions(p, limit)]
    if check:
        bad = [(n, where, sig) for n, where, sig in sorted(found)
               if where.startswith('core/') and not has_reason(*where.rsplit(':', 1)[:1], int(where.rsplit(':', 1)[1]))]
        for n, where, sig in bad:
            print(f'{where}: {n} lines, over {limit}, with no "// long: why" above it: {sig}')
        print(f'long_functions: {len(bad)} function(s) of core/ over {limit} lines without a reason')
        sys.exit(1 if bad else 0)
    for n, where, sig in sorted(found):
        print(n, where, sig)


if __name__ == '__main__':
    main()
