"""Thematic questions on a corpus written for the project: do RAPTOR's nodes bring the right documents?

    PYTHONPATH=src:. .venv/bin/python -m bench.raptor_themes [--embedding e5] [--thresholds 0.86 0.88 0.9]
    PYTHONPATH=src:. .venv/bin/python -m bench.raptor_themes --fixture tests/fixtures/raptor/themes.json

--fixture: the test suite's themed corpus instead (four themes, three English and three Chinese
documents each, plus one RESTRICTED document per theme whose marker must never reach a node);
there a theme has six documents, and the leaves compared are the top 6.

Five themes, four short documents each (English and Chinese), two broad questions per theme.
For each threshold: the nodes built, and per question whether the top node's member documents
all belong to the question's theme (precision) and how many of the theme's four documents the
top node brings, against how many the top-4 leaves bring.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from ragspine.retrieval.link.narrative_link import build_narrative_retriever
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.raptor import RaptorConfig, make_raptor_retriever
from ragspine.retrieval.vector.embeddings.factory import make_embedding_backend

THEMES: dict[str, list[str]] = {
    "exports": [
        "Revenue fell in 2024 because export orders from Europe dropped by a fifth.",
        "European customers cut their orders, so overseas sales declined sharply this year.",
        "出口订单减少，欧洲客户削减采购，海外销售额大幅下降。",
        "Weak demand in Germany and France hurt the export business in the second half.",
    ],
    "supply": [
        "A shortage of chips delayed production at the Suzhou plant for six weeks.",
        "Suppliers could not deliver semiconductors on time, halting two assembly lines.",
        "芯片短缺导致苏州工厂停产六周，供应商无法按时交货。",
        "Component shortages forced the factory to idle while waiting for parts.",
    ],
    "hiring": [
        "The company hired 400 software engineers in Shenzhen to build its cloud platform.",
        "Recruiting of developers doubled as the group expanded its engineering teams.",
        "公司在深圳招聘了四百名软件工程师，研发团队规模翻倍。",
        "New engineering offices opened in Hangzhou to attract technical talent.",
    ],
    "climate": [
        "The group cut carbon emissions by 12% by moving its plants to solar power.",
        "Renewable energy now supplies a third of the electricity used in production.",
        "集团通过改用太阳能将碳排放减少了百分之十二。",
        "A new sustainability plan targets net-zero emissions for all factories by 2035.",
    ],
    "legal": [
        "A patent lawsuit filed by a competitor could lead to damages of 50 million dollars.",
        "The court case over licensing fees remains unresolved and may require a settlement.",
        "竞争对手提起专利诉讼，公司可能需要支付五千万美元赔偿。",
        "Lawyers expect the intellectual property dispute to last another two years.",
    ],
}
QUESTIONS = {
    "exports": ["What happened to overseas demand?", "海外市场的需求发生了什么变化？"],
    "supply": ["What disrupted production?", "生产为什么中断？"],
    "hiring": ["How did the workforce change?", "人员招聘有什么变化？"],
    "climate": ["What is the environmental strategy?", "公司的环保举措有哪些？"],
    "legal": ["What legal risks does the company face?", "公司面临哪些法律风险？"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedding", default="e5")
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.86, 0.88, 0.9])
    parser.add_argument("--fixture", type=Path, help="a themed corpus in the format of tests/fixtures/raptor/themes.json")
    args = parser.parse_args()
    if args.fixture:
        data = json.loads(args.fixture.read_text("utf-8"))
        docs = [(d["id"], d["theme"], d["text"], "PUBLIC") for d in data["documents"]]
        docs += [(d["id"], d["theme"], d["text"], "RESTRICTED") for d in data["restricted"]]
        questions, markers = data["questions"], [d["marker"] for d in data["restricted"]]
    else:
        docs = [(f"{theme}-{i}", theme, text, "PUBLIC") for theme, texts in THEMES.items() for i, text in enumerate(texts)]
        questions, markers = QUESTIONS, []
    theme_of = {doc_id: theme for doc_id, theme, _, label in docs if label == "PUBLIC"}
    per_theme = max(sum(1 for t in theme_of.values() if t == theme) for theme in questions)
    backend = make_embedding_backend(args.embedding)
    with tempfile.TemporaryDirectory() as tmp:
        base, store = build_narrative_retriever(Path(tmp) / "themes.db", embedding_backend=backend, query_rewriter=None)
        try:
            for doc_id, _, text, label in docs:
                base.index.ingest(text, DocumentMeta(doc_id, sensitivity=label))
            for threshold in args.thresholds:
                raptor = make_raptor_retriever(base, mode="nodes", config=RaptorConfig(threshold, 8, 3))
                report = raptor.build(full=True)
                pure = brought = leaf_brought = leaked = 0
                for theme, qs in questions.items():
                    for q in qs:
                        raptor.mode = "nodes"
                        top = raptor.retrieve(q, top_k=1)
                        ids = set(top[0]["lineage"]["doc_ids"]) if top else set()
                        pure += bool(ids) and all(theme_of.get(d) == theme for d in ids)
                        brought += sum(theme_of.get(d) == theme for d in ids)
                        leaked += sum(m in s["text"] for s in top for m in markers) + sum(d not in theme_of for d in ids)
                        raptor.mode = "leaves"
                        leaf_brought += sum(theme_of.get(s["doc_id"]) == theme for s in raptor.retrieve(q, top_k=per_theme))
                n = sum(len(q) for q in questions.values())
                print(f"{args.embedding} threshold {threshold}: nodes {report.nodes}; top node all on-theme "
                      f"{pure}/{n}; on-theme documents brought: top node {brought / n:.2f}, top-{per_theme} leaves "
                      f"{leaf_brought / n:.2f} (of {per_theme}); RESTRICTED in a node: {leaked}")  # fmt: skip
                raptor.close()
        finally:
            base.index.close()
            store.close()

if __name__ == "__main__":
    main()
