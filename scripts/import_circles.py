#!/usr/bin/env python3
"""Lists the import circles between latscope's source files.

A file imports another when it names a path into it: `crate::a::b::…` (in a `use` line or in
code) or `super::…`. Each path resolves to the deepest file that exists (`src/a/b.rs` or
`src/a/b/mod.rs`). A circle is a strongly connected set of two or more files; circles whose
files sit in more than one folder are the ones the layering forbids.

    scripts/import_circles.py            # every circle, one per paragraph
    scripts/import_circles.py --count    # just the numbers
Exit status 0 always: this reports, CI does not gate on it.
"""
import os
import re
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PATH = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
GROUP = re.compile(r"\b(crate|super)::\{([^}]*)\}", re.S)


def module_of(file: Path) -> list[str]:
    rel = file.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return parts


def file_of(parts: list[str]) -> Path | None:
    """The deepest existing file for a module path."""
    for n in range(len(parts), -1, -1):
        head = parts[:n]
        if not head:
            return SRC / "lib.rs"
        for cand in (SRC.joinpath(*head).with_suffix(".rs"), SRC.joinpath(*head, "mod.rs")):
            if cand.exists():
                return cand
    return None


def strip_tests(text: str) -> str:
    """Drops `#[cfg(test)] mod tests { … }` blocks: tests may import anything."""
    at = text.find("#[cfg(test)]\nmod tests")
    return text if at < 0 else text[:at]


def imports(file: Path) -> set[Path]:
    text = strip_tests(file.read_text())
    text = re.sub(r"//[^\n]*", "", text)
    here = module_of(file)
    out = set()

    def add(root: str, rest: list[str]):
        # `super` of `a/b.rs` (module a::b) and of `a/mod.rs` (module a) alike: drop one part
        base = [] if root == "crate" else here[:-1]
        target = file_of(base + rest)
        if target and target != file:
            out.add(target)

    for m in PATH.finditer(text):
        add(m.group(1), m.group(2).split("::")[1:])
    for m in GROUP.finditer(text):
        for item in m.group(2).split(","):
            item = item.strip()
            if item:
                add(m.group(1), re.split(r"::", item.split(" as ")[0])[:])
    return out


def circles(graph: dict[Path, set[Path]]) -> list[list[Path]]:
    index, low, stack, on, out = {}, {}, [], set(), []
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    files = sorted(p for p in SRC.rglob("*.rs"))
    graph = {f: imports(f) for f in files}
    # a folder's mod.rs declaring its children is not an import of them
    for f in files:
        if f.name in ("mod.rs", "lib.rs", "main.rs"):
            graph[f] = {g for g in graph[f] if not is_child(f, g) or uses(f, g)}
    found = circles(graph)
    crossing = [c for c in found if len({p.parent for p in c}) > 1]
    if "--count" not in sys.argv:
        for c in found:
            tag = "across folders" if c in crossing else "within a folder"
            print(f"{len(c)} files, {tag}:")
            for p in c:
                print("   ", p.relative_to(SRC.parent))
            print()
    print(f"{len(found)} circles, {len(crossing)} across folders, "
          f"{sum(len(c) for c in found)} files in them")


def is_child(parent: Path, child: Path) -> bool:
    return child.parent == parent.parent or child.parent.parent == parent.parent


def uses(parent: Path, child: Path) -> bool:
    """Whether `parent` names something inside `child` beyond its `mod`/`pub use` lines."""
    name = child.stem if child.name != "mod.rs" else child.parent.name
    text = strip_tests(parent.read_text())
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"^\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*;", "", text, flags=re.M)
    text = re.sub(r"^\s*pub(\([^)]*\))?\s+use\s+[^;]*;", "", text, flags=re.M | re.S)
    return re.search(rf"\b{re.escape(name)}::", text) is not None


if __name__ == "__main__":
    main()
