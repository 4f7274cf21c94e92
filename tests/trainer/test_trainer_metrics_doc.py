from pathlib import Path

from dapo.trainer.metric_docs import metrics_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def test_metrics_doc_matches_the_code():
    assert metrics_markdown() in DOC.read_text(), "regenerate docs/metrics.md from METRICS"
