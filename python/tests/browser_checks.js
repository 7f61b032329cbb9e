// Run inside a report page by test_report_browser.py (chromium --headless --dump-dom): it
// opens every <details>, measures the laid-out page and writes what it found as JSON into
// a <pre> with the id browser-checks.
window.addEventListener("load", () => {
  document.querySelectorAll("details").forEach((d) => { d.open = true; });
  const width = document.documentElement.clientWidth;
  const describe = (e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") +
    (e.className && typeof e.className === "string" ? "." + e.className : "") + ": " +
    (e.textContent || "").trim().slice(0, 60);
  const inScrollBox = (e) => {
    for (let p = e.parentElement; p; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX;
      if (o === "auto" || o === "scroll") return true;
    }
    return false;
  };
  const out = { width };
  const sections = [...document.querySelectorAll("main > section")];
  out.first_section = sections.length ? sections[0].id : null;
  const findings = document.getElementById("findings");
  out.before_findings = findings ? [...document.querySelectorAll(
    "section, table, figure, img, h2, h3, details")]
    .filter((e) => findings.compareDocumentPosition(e) & Node.DOCUMENT_POSITION_PRECEDING)
    .map(describe) : ["no #findings"];
  const images = [...document.images];
  out.images = images.length;
  out.broken_images = images.filter((i) => !i.complete || i.naturalWidth === 0)
    .map((i) => i.dataset.name || i.src.slice(0, 60));
  out.overflowing = [...document.body.querySelectorAll("*")].filter((e) => {
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.right > width + 1 && !inScrollBox(e);
  }).slice(0, 20).map(describe);
  out.page_width = document.documentElement.scrollWidth;
  // A cell is squeezed when one of its words is wider than the cell's content box.
  const ctx = document.createElement("canvas").getContext("2d");
  out.squeezed = [];
  out.cells = 0;
  for (const cell of document.querySelectorAll("td, th")) {
    if (!cell.getClientRects().length) continue;
    out.cells += 1;
    const style = getComputedStyle(cell);
    const room = cell.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    let widest = 0, word = "";
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      ctx.font = getComputedStyle(node.parentElement).font;
      for (const w of node.textContent.split(/\s+/)) {
        const px = ctx.measureText(w).width;
        if (px > widest) { widest = px; word = w; }
      }
    }
    if (widest > room + 1) {
      out.squeezed.push(`${describe(cell)} (word "${word}" ${widest.toFixed(0)} px in ${room.toFixed(0)} px)`);
    }
  }
  const pre = document.createElement("pre");
  pre.id = "browser-checks";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
