"""``python -m autograder report GRADING --out REPORT/``: the class at a glance.

Writes ``REPORT/report.html`` (one self-contained page: its plots are PNG images
embedded as base64, no script, no stylesheet or font from anywhere else, so it opens
offline and can be mailed) and ``REPORT/report.json`` (the same figures as data):

* per project stage and per notebook: pass rate, status counts (pass, fail, error,
  timeout, memory, crash, missing; a refusal or tampering is counted under its own
  reason, e.g. ``tamper-timing``, and so is a timeout the machine may have starved,
  ``wall-clock-starved``; a stage whose every check is a stub's "not yet" as
  ``not attempted``, apart from the failures), how many submissions have no grading of it
  yet, and the median, quartiles and range of its wall time;
* per notebook question: pass rate and status counts;
* per check (and notebook question): how many submissions failed it, the hints (or
  visible messages) they were given, and two anonymised ``yours:``/``expected:``
  examples, ranked: the class's most common mistakes first (a timing check left
  ``inconclusive`` by the machine's load, and a check that met only a stub's "not yet",
  are counted apart, not as mistakes);
* flagged: checks that nobody passes (a broken check or an unteachable stage), and
  checks that no grading ever failed (a check that may not be able to fail);
* the distribution of totals;
* verdicts that moved between two gradings of the same files under the same checker
  (timing noise or nondeterminism: ``autograder.regrade_diff``).

It reads the latest grading of each (submission, item), and the whole history for the
last point; the gradebook is opened read-only. Submission names appear only where the
instructor must act (the moved verdicts); examples of answers are anonymised.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from autograder import outcomes
from autograder.classdata import ClassBook, ClassDataError, Row, item_order, load
from autograder.regrade_diff import changes

NOT_RUN = "not run"   # the message prefix of a check the stage never reached
INCONCLUSIVE = "inconclusive"   # a timing check that could not decide: no mistake
EXAMPLES = 2
TOP_HINTS = 3


# ----------------------------------------------------------------------------------
# Figures (data)
# ----------------------------------------------------------------------------------

def category(status: str, reason: str, record: dict | None = None) -> str:
    """A status, a flagged reason (a refusal or tampering) or a starved timeout
    (``wall-clock-starved``) counted on its own, or "not attempted" for a stage whose
    every check is a stub's "not yet"."""
    if record is not None and outcomes.not_attempted(record):
        return outcomes.NOT_ATTEMPTED
    # a timeout the machine may have starved, counted apart from the learners' own
    return reason if reason in (*outcomes.REFUSALS, outcomes.STARVED) else status


def spread(values: list[float]) -> dict | None:
    if not values:
        return None
    values = sorted(values)
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return {"n": len(values), "median": round(statistics.median(values), 3),
            "q1": round(q[0], 3), "q3": round(q[2], 3), "min": round(values[0], 3),
            "max": round(values[-1], 3)}


def anonymiser(students: list[str]):
    names = sorted((s for s in students if len(s) >= 3), key=len, reverse=True)
    # whole names only: a learner called "time" must not blank "time_fn" in every line
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(re.escape(n) for n in names) + r")(?!\w)",
                         re.I) if names else None
    paths = re.compile(r"(?:/[^\s/'\"<>:]+)+/([^\s/'\"<>:]+)")

    def clean(text) -> str:
        text = " ".join(str(text or "").split())
        if pattern:
            text = pattern.sub("ALEARNER", text)
        return paths.sub(r".../\1", text).replace("ALEARNER", "<a learner>")[:240]
    return clean


def not_ran(check: dict) -> bool:
    """No file, a stage that never reached the check, or a stub's "not yet": nothing the
    check could judge."""
    return check.get("status") in outcomes.NOT_STARTED or str(
        check.get("message") or "").startswith(NOT_RUN)


def check_failed(check: dict) -> bool:
    """The check itself said no to work it could judge."""
    return check.get("status") not in ("pass", INCONCLUSIVE) and not not_ran(check)


def figures(book: ClassBook) -> dict:
    latest = book.latest()
    students = book.students
    clean = anonymiser(students)
    items = book.items
    by_item: dict[str, list[Row]] = defaultdict(list)
    for (_, item), row in latest.items():
        by_item[item].append(row)

    item_rows = []
    for item in items:
        rows = by_item[item]
        counts = Counter(category(r.status, str(r.record.get("reason") or ""), r.record)
                         for r in rows)
        times = [float(r.record["wall_s"]) for r in rows
                 if isinstance(r.record.get("wall_s"), int | float) and r.status != "missing"]
        passed = sum(r.status == "pass" for r in rows)
        item_rows.append({"item": item, "kind": rows[0].kind if rows else "",
                          "graded": len(rows), "not_graded": len(students) - len(rows),
                          "not_attempted": counts.get(outcomes.NOT_ATTEMPTED, 0),
                          "pass_rate": round(passed / len(rows), 4) if rows else None,
                          "statuses": dict(counts.most_common()),
                          "time_s": spread(times)})

    questions, checks = [], []
    per_check: dict[tuple[str, str], dict] = {}
    for item in items:
        for row in by_item[item]:
            for c in row.checks:
                entry = per_check.setdefault((item, str(c["id"])), {
                    "item": item, "check": str(c["id"]), "kind": row.kind, "graded": 0,
                    "ran": 0, "passed": 0, "failed": 0, "inconclusive": 0,
                    "not_attempted": 0, "statuses": Counter(),
                    "hints": Counter(), "messages": Counter(), "examples": []})
                entry["graded"] += 1
                status = str(c.get("status"))
                entry["statuses"][status] += 1
                if status == "not-implemented":  # a stub's "not yet": not a mistake
                    entry["not_attempted"] += 1
                if not_ran(c):
                    continue
                entry["ran"] += 1
                if status == "pass":
                    entry["passed"] += 1
                    continue
                if status == INCONCLUSIVE:
                    entry["inconclusive"] += 1
                    continue
                entry["failed"] += 1
                if c.get("hint"):
                    entry["hints"][clean(c["hint"])] += 1
                message = "a hidden check failed" if c.get("hidden_failed") else c.get(
                    "message")
                if message:
                    entry["messages"][clean(message)] += 1
                example = {k: clean(c[k]) for k in ("yours", "expected") if c.get(k)}
                if example and example not in entry["examples"] \
                        and len(entry["examples"]) < EXAMPLES:
                    entry["examples"].append(example)
    for entry in per_check.values():
        out = {**entry, "statuses": dict(entry["statuses"].most_common()),
               "hints": entry["hints"].most_common(TOP_HINTS),
               "messages": entry["messages"].most_common(TOP_HINTS),
               "pass_rate": round(entry["passed"] / entry["ran"], 4) if entry["ran"] else None}
        checks.append(out)
        if entry["kind"] == "notebook":
            questions.append(out)
    checks.sort(key=lambda c: (-c["failed"], item_order(c["item"]), c["check"]))

    # flags: nobody passes (latest), never failed (any grading, ever)
    ever_failed: set[tuple[str, str]] = set()
    ever_ran: Counter = Counter()
    for row in book.rows:
        for c in row.checks:
            if not not_ran(c):
                ever_ran[(row.item, str(c["id"]))] += 1
                if check_failed(c):
                    ever_failed.add((row.item, str(c["id"])))
    nobody_passes = [{"item": c["item"], "check": c["check"], "ran": c["ran"],
                      "statuses": c["statuses"]}
                     for c in checks if c["ran"] and not c["passed"]]
    never_failed = [{"item": i, "check": cid, "gradings": n}
                    for (i, cid), n in sorted(ever_ran.items(),
                                              key=lambda kv: (item_order(kv[0][0]), kv[0][1]))
                    if (i, cid) not in ever_failed]

    totals = defaultdict(float)
    tops = defaultdict(float)
    for (student, _), row in latest.items():
        totals[student] += row.points
        tops[student] += row.max_points
    total_values = [totals[s] for s in students]
    noise = [c for c in changes(book) if not c.cause]
    return {
        "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
        "gradebook": str(book.path), "warnings": book.warnings,
        "submissions": len(students), "items": len(items), "rows": len(book.rows),
        "runs": [{"run_id": r.get("run_id"), "started_at": r.get("started_at"),
                  "results": sum(x.run_id == r.get("run_id") for x in book.rows)}
                 for r in book.runs],
        "incomplete": {s: [i for i in items if (s, i) not in latest] for s in students
                       if any((s, i) not in latest for i in items)},
        "per_item": item_rows, "per_question": questions, "per_check": checks,
        "nobody_passes": nobody_passes, "never_failed": never_failed,
        "totals": {"max_total": max(tops.values(), default=0.0), **(spread(total_values) or
                   {"n": 0}), "values": sorted(total_values)},
        "moved_same_files": [{**c.as_dict(), "timing": _timing(c)} for c in noise],
    }


TIMING_WORDS = re.compile(r"tim|speed|fast|slow|latenc|throughput|overhead|\bms\b|sec|"
                          r"clock|wall", re.I)


def _timing(change) -> bool:
    """A moved verdict that looks like a timing one (a time limit, a timing check)."""
    if {"timeout", INCONCLUSIVE} & {change.old.status, change.new.status}:
        return True
    return any(TIMING_WORDS.search(" ".join([m["id"], m["old_message"], m["new_message"]]))
               for m in change.checks)


# ----------------------------------------------------------------------------------
# Plots (embedded PNG) and the page
# ----------------------------------------------------------------------------------

def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def plots(data: dict) -> dict[str, str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
    out = {}
    items = [r for r in data["per_item"] if r["pass_rate"] is not None]
    if items:
        fig, ax = plt.subplots(figsize=(7, 0.35 * len(items) + 1.2))
        ax.barh([r["item"] for r in items][::-1], [r["pass_rate"] * 100 for r in items][::-1],
                color="#4a7")
        ax.set_xlim(0, 100)
        ax.set_xlabel("pass rate (%) of the latest gradings")
        out["pass_rate"] = _png(fig)
    values = data["totals"].get("values") or []
    if values:
        fig, ax = plt.subplots(figsize=(7, 3))
        ax.hist(values, bins=min(20, max(5, len(set(values)))), color="#47a")
        ax.set_xlabel(f"total points (of {data['totals']['max_total']:g})")
        ax.set_ylabel("submissions")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        out["totals"] = _png(fig)
    timed = [r for r in data["per_item"] if r["time_s"]]
    if timed:
        fig, ax = plt.subplots(figsize=(7, 0.35 * len(timed) + 1.2))
        stats = [{"label": r["item"], "med": r["time_s"]["median"], "q1": r["time_s"]["q1"],
                  "q3": r["time_s"]["q3"], "whislo": r["time_s"]["min"],
                  "whishi": r["time_s"]["max"], "fliers": []} for r in timed][::-1]
        ax.bxp(stats, orientation="horizontal", showfliers=False)
        ax.set_xlabel("wall time per grading (s): median, quartiles, range")
        out["time"] = _png(fig)
    failing = [c for c in data["per_check"] if c["failed"]][:15]
    if failing:
        fig, ax = plt.subplots(figsize=(7, 0.35 * len(failing) + 1.2))
        ax.barh([f"{c['item']} · {c['check']}" for c in failing][::-1],
                [c["failed"] for c in failing][::-1], color="#a54")
        ax.set_xlabel("submissions that failed the check (latest gradings)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        out["failing"] = _png(fig)
    return out


CSS = ("body{font-family:sans-serif;max-width:72em;margin:1.5em auto;padding:0 1em;"
       "color:#222}table{border-collapse:collapse;margin:.5em 0 1.5em}"
       "td,th{border:1px solid #ccc;padding:.25em .5em;vertical-align:top;text-align:left}"
       "th{background:#f3f3f3}.num{text-align:right}.flag{background:#fff3cd}"
       ".warn{background:#fde2e1;padding:.4em .8em}img{max-width:100%}"
       "code{font-size:90%}small{color:#666}")


def page(data: dict, images: dict[str, str]) -> str:
    e = html.escape
    out = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>",
           "<title>Class report</title>", f"<style>{CSS}</style></head><body>",
           "<h1>Class report</h1>",
           f"<p><small>{e(data['gradebook'])} · {data['submissions']} submission(s) · "
           f"{data['items']} graded item(s) · {data['rows']} grading(s) in "
           f"{len(data['runs'])} run(s) · made {e(data['generated'])}</small></p>"]
    for w in data["warnings"]:
        out.append(f"<p class='warn'>{e(w)}</p>")
    if data["incomplete"]:
        out.append(f"<p class='warn'>{len(data['incomplete'])} submission(s) are not graded "
                   "on every item (a batch still running, or stopped half-way): "
                   + "; ".join(f"{e(s)}: {len(i)} item(s)" for s, i in
                               list(data["incomplete"].items())[:20]) + "</p>")

    def img(key: str, alt: str) -> None:
        if key in images:
            out.append(f"<p><img alt='{e(alt)}' src='data:image/png;base64,{images[key]}'>"
                       "</p>")

    out.append("<h2 id='items'>Stages and notebooks</h2>")
    img("pass_rate", "pass rate per item")
    out.append("<table><tr><th>item</th><th>graded</th><th>pass rate</th><th>statuses</th>"
               "<th>not graded</th><th>time median (s)</th><th>quartiles</th><th>range</th>"
               "</tr>")
    for r in data["per_item"]:
        t = r["time_s"]
        out.append(f"<tr><td>{e(r['item'])}</td><td class='num'>{r['graded']}</td>"
                   f"<td class='num'>{_pct(r['pass_rate'])}</td><td>{_counts(r['statuses'])}"
                   f"</td><td class='num'>{r['not_graded']}</td>"
                   + (f"<td class='num'>{t['median']:.2f}</td><td class='num'>{t['q1']:.2f}"
                      f"–{t['q3']:.2f}</td><td class='num'>{t['min']:.2f}–{t['max']:.2f}</td>"
                      if t else "<td></td><td></td><td></td>") + "</tr>")
    out.append("</table>")
    img("time", "wall time per item")

    if data["per_question"]:
        out.append("<h2 id='questions'>Notebook questions</h2><table><tr><th>notebook</th>"
                   "<th>question</th><th>graded</th><th>pass rate</th><th>statuses</th></tr>")
        for q in data["per_question"]:
            out.append(f"<tr><td>{e(q['item'])}</td><td>{e(q['check'])}</td>"
                       f"<td class='num'>{q['graded']}</td><td class='num'>"
                       f"{_pct(q['pass_rate'])}</td><td>{_counts(q['statuses'])}</td></tr>")
        out.append("</table>")

    out.append("<h2 id='mistakes'>The class's most common mistakes</h2>")
    img("failing", "failures per check")
    failing = [c for c in data["per_check"] if c["failed"]]
    if not failing:
        out.append("<p>No check was failed in the latest gradings.</p>")
    else:
        out.append("<table><tr><th>#</th><th>check</th><th>failed / ran</th>"
                   "<th>hints given, or else the message (how many)</th>"
                   "<th>examples (anonymised)</th></tr>")
        for n, c in enumerate(failing, 1):
            said = c["hints"] or c["messages"]
            hints = "<br>".join(f"{e(h)} <small>({k})</small>" for h, k in said)
            examples = "<br>".join(
                "<br>".join(f"<code>{e(k)}: {e(v)}</code>" for k, v in ex.items())
                for ex in c["examples"])
            out.append(f"<tr><td class='num'>{n}</td><td>{e(c['item'])}<br><b>"
                       f"{e(c['check'])}</b></td><td class='num'>{c['failed']} / {c['ran']}"
                       f"</td><td>{hints}</td><td>{examples}</td></tr>")
        out.append("</table>")

    out.append("<h2 id='flags'>Checks to look at</h2>")
    out.append("<h3>Nobody passes (a broken check, or a stage nobody could do)</h3>")
    out.append(_flag_list([f"{c['item']} · {c['check']}: 0 of {c['ran']} passed "
                           f"({_plain_counts(c['statuses'])})" for c in data["nobody_passes"]]))
    out.append("<h3>No grading has ever failed (can this check fail at all?)</h3>")
    out.append(_flag_list([f"{c['item']} · {c['check']}: passed in all {c['gradings']} "
                           "grading(s)" for c in data["never_failed"]]))

    out.append("<h2 id='totals'>Totals</h2>")
    img("totals", "distribution of totals")
    t = data["totals"]
    if t.get("n"):
        out.append(f"<p>{t['n']} submission(s), of {t['max_total']:g} points: median "
                   f"{t['median']:g}, quartiles {t['q1']:g}–{t['q3']:g}, range {t['min']:g}–"
                   f"{t['max']:g}.</p>")

    moved = data["moved_same_files"]
    out.append("<h2 id='noise'>Verdicts that moved between two gradings of the same files"
               "</h2><p>Same files, same checker, same secret, different verdict: timing "
               "close to a threshold, or nondeterminism. <code>python -m autograder diff"
               "</code> lists every change.</p>")
    if not moved:
        out.append("<p>None.</p>")
    else:
        out.append("<table><tr><th>submission</th><th>item</th><th>old</th><th>new</th>"
                   "<th>checks that moved</th><th>timing?</th></tr>")
        for m in moved:
            o, n = m["old"], m["new"]
            checks = "<br>".join(f"{e(c['id'])}: {e(c['old'])} → {e(c['new'])}"
                                 for c in m["checks"])
            out.append(f"<tr class='flag'><td>{e(m['student'])}</td><td>{e(m['item'])}</td>"
                       f"<td>{e(o['status'])} {o['points']:g}</td><td>{e(n['status'])} "
                       f"{n['points']:g}</td><td>{checks}</td><td>"
                       f"{'yes' if m['timing'] else ''}</td></tr>")
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _pct(rate) -> str:
    return "" if rate is None else f"{rate * 100:.0f}%"


def _plain_counts(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def _counts(counts: dict) -> str:
    return html.escape(_plain_counts(counts))


def _flag_list(lines: list[str]) -> str:
    if not lines:
        return "<p>None.</p>"
    return "<ul>" + "".join(f"<li class='flag'>{html.escape(x)}</li>" for x in lines) + "</ul>"


def report(grading: Path, out: Path) -> dict:
    book = load(grading)
    data = figures(book)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    images = plots(data)
    (out / "report.html").write_text(page(data, images), encoding="utf-8")
    (out / "report.json").write_text(json.dumps({**data, "plots": sorted(images)}, indent=1,
                                                ensure_ascii=False), encoding="utf-8")
    return {"html": str(out / "report.html"), "json": str(out / "report.json"),
            "submissions": data["submissions"], "items": data["items"],
            "warnings": data["warnings"]}


def main(grading: Path, out: Path) -> int:
    try:
        info = report(grading, out)
    except ClassDataError as err:
        print(f"report: {err}", file=sys.stderr)
        return 2
    for w in info["warnings"]:
        print(f"note: {w}", file=sys.stderr)
    print(f"wrote {info['html']} and {info['json']} ({info['submissions']} submission(s), "
          f"{info['items']} item(s))")
    return 0
