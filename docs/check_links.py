"""Checks the relative links of the Markdown guides (docs/*.md, examples/README.md): each must
name a file or folder of the source tree, and a #anchor in another guide must match one of its
headings.

Usage: check_links.py SOURCE_ROOT
"""
import glob
import os
import re
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path):
    """GitHub-style anchors of a Markdown file's headings."""
    found = set()
    for line in open(path, encoding="utf-8"):
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            title = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
            found.add(title)
    return found


def main():
    root = sys.argv[1]
    guides = sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    guides.append(os.path.join(root, "examples", "README.md"))
    failures, checked = [], 0
    for guide in guides:
        text = open(guide, encoding="utf-8").read()
        text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold no links
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target):  # http:, mailto:
                continue
            checked += 1
            path, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(guide), path)) if path \
                else guide
            if not os.path.exists(resolved):
                failures.append(f"{os.path.relpath(guide, root)}: {target} does not exist")
            elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
                failures.append(f"{os.path.relpath(guide, root)}: no heading for #{anchor}")
    for failure in failures:
        print("FAIL:", failure)
    print(f"{checked} links in {len(guides)} guides, {len(failures)} broken")
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
