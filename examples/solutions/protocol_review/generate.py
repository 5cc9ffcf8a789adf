"""Protocol review: a DOCX study protocol with seven planted design, dosing and statistics
flaws.

The data generator of this example task, run by examples/generate.py.
"""

from __future__ import annotations

from pathlib import Path

from docx import Document
from task_files import FIXED_DATE, contains, exists, meta_for, normalize_zip, write_task

PROTOCOL = [
    ("h", "Protocol: Efficacy of XR-17 in DSS-induced colitis (v3, draft)"),
    (
        "p",
        "Author: M. Keller   |   Lab: Mucosal Immunology   |   Status: draft for ethics submission",
    ),
    ("h2", "1. Aim"),
    (
        "p",
        "To test whether daily XR-17 reduces colitis severity (histology score, weight loss, colon length) in C57BL/6 mice given 2.5% DSS in drinking water for 7 days.",
    ),
    ("h2", "2. Animals and groups"),
    (
        "p",
        "Female C57BL/6J mice, 8–10 weeks, purchased from the vendor and acclimatised for 7 days. n = 4 per group (based on cage availability).",
    ),
    ("p", "Group 1: DSS + XR-17 10 mg/kg i.p. daily, days 0–7."),
    ("p", "Group 2: healthy controls (normal drinking water, no injections)."),
    (
        "p",
        "Allocation: mice are assigned to groups by cage as they arrive; the first two cages delivered go to Group 1.",
    ),
    ("h2", "3. Dosing"),
    (
        "p",
        "XR-17 is dissolved at 1 mg/mL in sterile saline (stock prepared fresh weekly and stored at room temperature). Each mouse (~25 g) receives 1 mL i.p. once daily to achieve 10 mg/kg.",
    ),
    ("h2", "4. Monitoring"),
    (
        "p",
        "Body weight, stool consistency and rectal bleeding are scored daily by the study lead, who also performs the injections. Humane endpoint: >25% weight loss.",
    ),
    ("h2", "5. Endpoint and sample collection"),
    (
        "p",
        "On day 8 mice are euthanised. Blood is collected by cardiac puncture into EDTA tubes and centrifuged at 2,000 rpm (= 2,000 x g) for 10 min at room temperature to obtain plasma. Colons are removed, length measured, and distal colon fixed in 10% formalin.",
    ),
    ("p", "Histology is scored (0–12 scale) by the study lead using the lab's standard scheme."),
    ("h2", "6. Sample processing"),
    (
        "p",
        "Colon tissue for RNA is snap-frozen and stored at −80 °C. Plasma cytokines (12-plex panel) are measured at days 3, 5 and 7 from tail-vein bleeds and at endpoint.",
    ),
    ("h2", "7. Statistics"),
    (
        "p",
        "Each of the 12 cytokines at each time point will be compared between groups with an unpaired t-test; any cytokine with p < 0.05 will be reported as affected by XR-17. Weight curves will be compared with t-tests at each day.",
    ),
]

FLAWS = [
    {
        "id": "no_randomization",
        "where": "2. Allocation",
        "issue": "Allocation by cage/arrival order, not randomized.",
    },
    {
        "id": "no_blinding",
        "where": "4./5. scoring",
        "issue": "Clinical and histology scoring by the unblinded study lead who also doses.",
    },
    {
        "id": "missing_vehicle_control",
        "where": "2. Groups",
        "issue": "No DSS + vehicle group; treatment effect is confounded with DSS and with injection/vehicle.",
    },
    {
        "id": "dose_calculation",
        "where": "3. Dosing",
        "issue": "1 mL of 1 mg/mL into a 25 g mouse is 40 mg/kg (not 10) and 40 mL/kg injection volume (far above i.p. limits ~10 mL/kg).",
    },
    {
        "id": "centrifuge_units",
        "where": "5. Blood",
        "issue": "rpm is not × g; g-force depends on rotor radius; specify RCF (e.g. 2,000 × g).",
    },
    {
        "id": "sample_size",
        "where": "2. n = 4",
        "issue": "n = 4 per group based on cage availability, no power calculation.",
    },
    {
        "id": "multiple_comparisons",
        "where": "7. Statistics",
        "issue": "12 cytokines × 4 time points and daily weights with uncorrected t-tests; repeated measures ignored.",
    },
]


def generate(root: Path) -> None:
    """Write tasks/protocol_review/ and truth/protocol_review.json under root."""
    task_id = "protocol_review"
    doc = Document()
    for kind, text in PROTOCOL:
        if kind == "h":
            doc.add_heading(text, level=1)
        elif kind == "h2":
            doc.add_heading(text, level=2)
        else:
            doc.add_paragraph(text)
    cp = doc.core_properties
    cp.author = "M. Keller"
    cp.last_modified_by = "M. Keller"
    cp.title = "XR-17 DSS colitis protocol v3"
    cp.created = FIXED_DATE
    cp.modified = FIXED_DATE
    cp.revision = 3
    folder = root / "tasks" / task_id
    path = folder / "XR17_DSS_protocol_v3.docx"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc.save(str(path))
    normalize_zip(path)

    out = "results/review.md"
    checks = [
        exists("review", out),
        contains("randomization", out, r"randomi[sz]"),
        contains("blinding", out, r"blind"),
        contains("vehicle_control", out, r"vehicle"),
        contains("dose_calculation", out, r"40\s*(mg\s*/\s*kg|ml\s*/\s*kg)"),
        contains(
            "centrifuge_units",
            out,
            r"(\brcf\b|[x×]\s?g\b|g[- ]force|rotor radius)[^\n]*\brpm\b|\brpm\b[^\n]*(\brcf\b|[x×]\s?g\b|g[- ]force|rotor radius)",
        ),
        contains("sample_size", out, r"power (analysis|calculation)|sample size"),
        contains(
            "multiple_comparisons",
            out,
            r"multiple (comparison|testing)|bonferroni|holm|false discovery|\bFDR\b",
        ),
    ]
    prompt = """
Could you have a look at my protocol before it goes to the ethics committee next week? (XR17_DSS_protocol_v3.docx). Honest feedback please, my PI is going to tear it apart otherwise. Mainly worried about the design and whether the stats section is ok
"""
    constraints = [
        "Write the review to results/review.md: list each problem you find with the section it is in, why it matters, and a concrete fix.",
        "Do not rewrite the whole protocol; a prioritized list of issues is what is wanted.",
    ]
    meta = meta_for(
        "preclinical methods",
        "design review",
        "medium",
        "A prioritized review of the protocol's design, dosing, sample processing and statistics problems, each with a concrete fix.",
        constraints,
        checks,
    )
    truth = {"task_id": task_id, "planted_flaws": FLAWS}
    write_task(root, task_id, prompt, meta, truth)
