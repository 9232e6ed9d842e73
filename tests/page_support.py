"""The sweep page's combined table read back as cell texts (tests of sweeps.summary_page and of a multirun)."""

from __future__ import annotations


def page_table(text: str) -> list[list[str]]:
    """The combined table of a summary.html (every split's), cell texts row by row, the link column left out."""
    from html.parser import HTMLParser

    class Cells(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.rows: list[list[str]] = []
            self.inside = self.cell = False

        def handle_starttag(self, tag, attrs) -> None:  # noqa: ANN001
            if tag == "table":
                self.inside = ("class", "combined") in attrs
            elif self.inside and tag == "tr":
                self.rows.append([])
            elif self.inside and tag in ("td", "th"):
                self.cell = True
                self.rows[-1].append("")

        def handle_endtag(self, tag) -> None:  # noqa: ANN001
            self.cell = self.cell and tag not in ("td", "th")
            self.inside = self.inside and tag != "table"

        def handle_data(self, data) -> None:  # noqa: ANN001
            if self.cell:
                self.rows[-1][-1] += data

    parser = Cells()
    parser.feed(text)
    return [r[:-1] for r in parser.rows]
