"""Review of XR17_DSS_protocol_v3.docx: read the protocol, verify its numbers, write a prioritized review.

Run from the workspace root:  python3 solve.py
Writes results/review.md (and results/protocol_text.txt, the extracted text, for traceability).
"""

import os
import re

from docx import Document

os.makedirs("results", exist_ok=True)
doc = Document("XR17_DSS_protocol_v3.docx")
paras = [p.text.strip() for p in doc.paragraphs if p.text.strip()]
text = "\n".join(paras)
with open("results/protocol_text.txt", "w", encoding="utf-8") as fh:
    fh.write(text + "\n")


def find(pattern):
    m = re.search(pattern, text, flags=re.I)
    return m


# --- verify the dosing arithmetic from the protocol's own numbers
stock = float(find(r"dissolved at ([\d.]+) mg/mL").group(1))
vol_ml = float(find(r"receives ([\d.]+) mL").group(1))
body_g = float(find(r"\(~\s*([\d.]+) g\)").group(1))
target = float(find(r"to achieve ([\d.]+) mg/kg").group(1))
actual_dose = stock * vol_ml / (body_g / 1000.0)
vol_per_kg = vol_ml / (body_g / 1000.0)
needed_stock = target / 10.0  # mg/mL giving the target dose at a 10 mL/kg injection volume
n_per_group = int(find(r"n\s*=\s*(\d+) per group").group(1))
rpm = find(r"([\d,]+) rpm")
n_cytokines = int(find(r"\((\d+)-plex").group(1))

print(
    f"dose check: {stock} mg/mL x {vol_ml} mL / {body_g} g = {actual_dose:.0f} mg/kg ({vol_per_kg:.0f} mL/kg)"
)

review = f"""# Review: XR-17 DSS colitis protocol (v3)

Overall: the biology is reasonable, but as written the study cannot show that XR-17 works, and two items
(dose volume, allocation) would likely be sent back by the ethics committee. Issues in priority order:

## Critical

1. **No disease control (DSS + vehicle) group** (section 2, Groups). Group 1 is DSS + XR-17 and Group 2 is healthy,
   un-injected mice. Any difference is DSS + drug + daily i.p. injection stress combined; you cannot attribute anything
   to XR-17. *Fix:* add DSS + vehicle (saline, same volume and schedule) as the primary comparator; keep a small healthy
   group only as a reference for the DSS effect.

2. **Dose calculation is wrong by 4-fold, and the injection volume is unsafe** (section 3). {stock:g} mg/mL × {vol_ml:g} mL
   into a ~{body_g:g} g mouse = **{actual_dose:.0f} mg/kg**, not {target:g} mg/kg, in a volume of **{vol_per_kg:.0f} mL/kg**
   (typical i.p. maximum ~10 mL/kg, i.e. 0.25 mL for a 25 g mouse). *Fix:* dose by body weight measured that day at
   10 mL/kg: a {needed_stock:g} mg/mL solution gives {target:g} mg/kg at 0.25 mL per 25 g mouse. Also state stability data for a stock kept a week at room temperature.

3. **No randomization** (section 2, Allocation). Assigning the first cages delivered to treatment confounds treatment
   with arrival order, shipment, cage and possibly age/weight. *Fix:* randomize mice to groups (e.g. computer-generated,
   stratified by body weight), with cage as a blocking factor or mixed-treatment cages where welfare allows; record the
   allocation sequence.

4. **No blinding** (sections 4–5). Clinical scores (stool, bleeding) and histology are scored by the study lead who also
   injects the mice, so outcome assessment is unblinded; histology and stool scores are subjective. *Fix:* code animals
   and slides; have a second person who does not know the allocation do clinical scoring and histology.

## Major

5. **Sample size not justified** (section 2): n = {n_per_group} per group "based on cage availability" has no power
   analysis behind it; DSS severity is highly variable, so n = {n_per_group} is very likely underpowered (and ethics committees
   require a justification). *Fix:* do a power / sample size calculation for the primary endpoint (e.g. histology score or
   weight loss) from pilot or published SDs, and state the expected attrition from the humane endpoint.

6. **Statistics: multiple comparisons and repeated measures** (section 7). {n_cytokines} cytokines × 4 time points = {n_cytokines * 4}
   uncorrected t-tests, plus one t-test per day for weight curves. With ~{n_cytokines * 4} tests at α = 0.05 you expect ~{n_cytokines * 4 * 0.05:.1f}
   "hits" by chance. *Fix:* pre-specify ONE primary endpoint and its test; analyse weight curves as repeated measures (mixed model or
   area under the curve); treat cytokines as secondary/exploratory with multiple testing correction (Holm or
   Benjamini-Hochberg FDR).

7. **Centrifugation given in rpm, and rpm is not × g** (section 5): "{rpm.group(0) if rpm else "rpm"} (= 2,000 x g)" is only
   true for one rotor radius; g-force depends on the radius (RCF = 1.118e-5 × r[cm] × rpm²). *Fix:* specify the RCF,
   e.g. "2,000 × g, 10 min, 4 °C" (plasma for cytokines should be spun cold, not at room temperature).

## Minor

8. Repeated tail-vein bleeds on days 3, 5 and 7 in colitic mice: check total blood volume limits (≤ 10% of blood volume per
   2 weeks) and consider their effect on the disease course; the bleeds themselves should be in the welfare assessment.
9. Humane endpoint of >25% weight loss is lenient for DSS; many committees expect 20%, plus a clinical score threshold.
10. Histology scheme should be cited/attached (0–12 scale: which components?), and the primary endpoint named explicitly.
11. Report per ARRIVE 2.0 (sex, housing, exclusion criteria defined in advance).

## Suggested design in one line
DSS + vehicle vs DSS + XR-17 (10 mg/kg at 10 mL/kg), healthy reference group; randomized, blinded scoring; n from a power
calculation; one pre-specified primary endpoint; secondary endpoints with FDR control.
"""
with open("results/review.md", "w", encoding="utf-8") as fh:
    fh.write(review)
print(review)
