"""What a rendered page would make a browser run or style inline, read with the standard HTML parser: the
security tests assert on this instead of on regular expressions over the markup."""
from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Audit:
    inline_scripts: int = 0  # <script> without src: executable text in the page
    style_elements: int = 0  # <style> blocks
    style_attributes: list[str] = field(default_factory=list)  # tags carrying style="..."
    handlers: list[str] = field(default_factory=list)  # on*= and hx-on* attributes (both run text as code)
    script_urls: list[str] = field(default_factory=list)  # attribute values starting with javascript:
    tags: list[str] = field(default_factory=list)
    attributes: dict[str, list[dict[str, str | None]]] = field(default_factory=dict)
    text: str = ""


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.audit = Audit()
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        audit = self.audit
        audit.tags.append(tag)
        values = dict(attrs)
        audit.attributes.setdefault(tag, []).append(values)
        if tag == "script" and not values.get("src"):
            audit.inline_scripts += 1
        if tag == "style":
            audit.style_elements += 1
        for name, value in attrs:
            if name == "style":
                audit.style_attributes.append(tag)
            if name.startswith("on") or name.startswith("hx-on"):
                audit.handlers.append(f"{tag} {name}")
            if value and value.strip().lower().startswith("javascript:"):
                audit.script_urls.append(f"{tag} {name}={value}")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_data(self, data: str) -> None:
        self._text.append(data)


def audit_html(html: str) -> Audit:
    parser = _Parser()
    parser.feed(html)
    parser.close()
    parser.audit.text = "".join(parser._text)
    return parser.audit
