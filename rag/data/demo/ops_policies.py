"""The policy documents of the ops demo's fictional freight company, Kestrel Freight, and the numbers they set.

The numbers are module constants because the tables (:mod:`rag.data.demo.ops_demo`) and the golden questions'
SQL (:mod:`rag.data.demo.ops_golden`) use the same ones: "claims above EUR 5,000 require manager approval" in the text
is ``amount_eur > 5000`` in a gold query. Every document is Markdown: a ``# Title`` and a few ``##`` sections.
"""

from __future__ import annotations

COMPANY = "Kestrel Freight"
SNAPSHOT = "2024-12-31"  # the tables describe shipments of 2024, as of this day

CLAIM_FILING_DAYS = 30
CLAIM_APPROVAL_EUR = 5000
ONTIME_THRESHOLD_PCT = 90
SCORECARD_MIN_SHIPMENTS = 50
TRANSIT_DAYS = {"express": 2, "standard": 5, "economy": 10}
SEVERE_DELAY_DAYS = 3
DELAY_CREDIT_PCT = 10
EXPRESS_MAX_KG = 500
MAX_KG = 24000
HAZARDOUS_TIER = "gold"
LIABILITY_EUR_PER_KG = 20
ESCALATION_DAYS = 45
STANDARD_TERMS_DAYS = 30
KEY_ACCOUNT_TERMS_DAYS = 60
CREDIT_SIGNOFF_EUR = 50000
FUEL_SURCHARGE_PCT = 12.5

_DOCS = {
    "claims.md": f"""# Claims Handling Policy

## Scope

This policy covers every claim a customer raises against {COMPANY} for the loss of, damage to, shortage in or late
delivery of a shipment. It applies to all service levels and to shipments handled by subcontracted carriers.

## Filing a claim

A claim must be filed within {CLAIM_FILING_DAYS} days of the delivery date. For a shipment that was never delivered,
the {CLAIM_FILING_DAYS} days run from the promised delivery date. Claims filed after the deadline are rejected unless
the customer can show that the damage could not have been detected earlier. Every claim must include the shipment
number, the amount claimed in euros, photographs of any damage and the signed delivery receipt.

## Approval limits

Claims handlers may approve claims up to EUR {CLAIM_APPROVAL_EUR:,} on their own authority. Claims above
EUR {CLAIM_APPROVAL_EUR:,} require manager approval before any payment is promised to the customer. A manager may ask
for an independent surveyor's report on any claim above that amount.

## Claim statuses

Every claim has exactly one status: open, approved, rejected or paid. A claim is open from the day it is filed until
a decision is made. An approved claim becomes paid when the finance team has transferred the amount. A rejected claim
records the reason for the rejection, and the customer is told that reason in writing.

## Reasons

The recorded reason of a claim is one of damage, loss, shortage or delay. A claim for delay is only accepted when the
delay caused a documented cost that the delivery credit of the service level policy does not cover.
""",
    "carrier_scorecard.md": f"""# Carrier Scorecard Policy

## Purpose

{COMPANY} works with a panel of subcontracted road carriers. The scorecard measures each carrier's reliability so
that volume goes to the carriers that keep our promises to customers.

## On-time rate

A delivery is on time when the shipment is delivered on or before its promised delivery date. The on-time rate of a
carrier is the share of its delivered shipments that were delivered on time; shipments still in transit and lost
shipments are not counted.

## Threshold and review

The minimum acceptable on-time rate is {ONTIME_THRESHOLD_PCT}%. A carrier whose on-time rate falls below
{ONTIME_THRESHOLD_PCT}% is placed under review. A carrier under review receives a remediation plan and no new
contract volume until its on-time rate has been back above the threshold for a full quarter. Scorecards are published
to carriers every quarter.

## Minimum volume

A rate is only reported for carriers with at least {SCORECARD_MIN_SHIPMENTS} delivered shipments in the period;
smaller carriers are reviewed case by case by the procurement team.

## Contract tiers

Every carrier holds a gold, silver or bronze contract tier. The tier is reviewed once a year, based on the annual
scorecard, the carrier's safety record and its prices.
""",
    "delivery_sla.md": f"""# Delivery Service Levels and Delays

## Service levels

We sell three service levels. Express shipments have a promised transit time of {TRANSIT_DAYS['express']} days.
Standard shipments have a promised transit time of {TRANSIT_DAYS['standard']} days. Economy shipments have a promised
transit time of {TRANSIT_DAYS['economy']} days. The promised delivery date is the ship date plus the promised transit
time, counted in calendar days.

## Late deliveries

A shipment is late when it is delivered after its promised delivery date. A delay of more than
{SEVERE_DELAY_DAYS} days is a severe delay. Late deliveries count against the carrier on its scorecard whatever the
cause.

## Customer compensation

For a severe delay the customer receives a freight credit of {DELAY_CREDIT_PCT}% of the base freight charge of the
shipment. The credit is applied automatically to the next invoice; the customer does not need to file a claim. Delays
of {SEVERE_DELAY_DAYS} days or less are not compensated.

## Notification

When a shipment is expected to miss its promised date, customer service must inform the customer before the end of
the promised delivery day and give a new expected delivery date.
""",
    "weight_limits.md": f"""# Weight and Dimension Limits

## Express

Express shipments are limited to {EXPRESS_MAX_KG} kg per shipment. An express shipment above {EXPRESS_MAX_KG} kg is a
limit breach: the booking should have been refused or moved to standard service, and the breach is reported to the
account's sales manager.

## Standard and economy

Standard and economy shipments may weigh up to {MAX_KG:,} kg, a full truck load. Shipments above 2,000 kg must be
booked at least two working days before collection, so that the depot can plan a suitable vehicle.

## Weighing

The weight recorded on a shipment is the gross weight in kilograms, including packaging and pallets, as measured at
the origin depot. When the customer's declared weight differs from the measured weight by more than 5%, the measured
weight is used for billing.

## Dimensions

A single piece may not be higher than 2.4 m or longer than 13.6 m. Pieces above these dimensions are abnormal loads
and need a special quotation from the planning team.
""",
    "hazardous_goods.md": f"""# Hazardous Goods Policy

## Scope

Hazardous goods are shipments that contain dangerous goods classified under ADR, such as flammable liquids, gases,
corrosive substances and lithium batteries. Such shipments are flagged as hazardous when they are booked.

## Approved carriers

Hazardous shipments may only be carried by carriers with a {HAZARDOUS_TIER} contract tier. Gold-tier carriers have
trained ADR staff and certified vehicles. Assigning a hazardous shipment to a silver or bronze carrier is a
compliance breach that must be reported to the safety officer within 24 hours.

## Documents

Every hazardous shipment must travel with a dangerous goods declaration signed by the shipper. The vehicle must also
carry the written instructions for the crew, in a language the crew can read.

## Incidents

Any leak, spill or fire involving hazardous goods is reported at once to the emergency services and to the safety
officer. The shipment is not moved again until the safety officer has released it.
""",
    "insurance.md": f"""# Insurance and Liability

## Standard liability

Unless the customer bought additional cover, our liability for loss or damage is limited to
EUR {LIABILITY_EUR_PER_KG} per kg of the gross weight of the shipment. Claims for amounts above this liability cap are
paid only up to the cap.

## Additional cover

Customers may buy declared-value cover at 0.3% of the declared value of the goods, up to EUR 250,000 per shipment.
Declared-value cover must be requested at booking; it cannot be added after collection.

## Exclusions

Neither standard liability nor declared-value cover applies to damage caused by insufficient packaging, to goods the
customer packed in a sealed container, or to consequential losses such as lost sales. Delay is compensated only under
the service level policy.

## Proof of value

For any payment above the standard liability, the customer must show the commercial invoice of the goods. Without
an invoice, the payment is limited to the standard liability whatever cover was bought.
""",
    "returns.md": """# Returns Policy

## Requesting a return

Returns must be requested within 14 days of delivery. The request names the original shipment and the reason for the
return. Customer service confirms the collection date within one working day.

## Service level and charges

Return shipments travel at economy service level. The customer pays the return freight, unless the return is caused
by our error, such as a delivery to the wrong address, in which case the return is free of charge.

## Inspection

Returned goods are inspected at the receiving depot within 5 working days. Goods found damaged on return are handled
under the claims policy, and the inspection report is attached to the claim.

## Refused deliveries

A consignee who refuses a delivery must state the reason to the crew. The shipment then travels back to the origin
depot, where it is held for 10 days before it is returned to the customer at the customer's cost.
""",
    "data_retention.md": """# Data Retention Policy

## Operational records

Shipment records, including addresses, weights and delivery confirmations, are kept for 7 years after delivery.
Claim records are kept for 10 years after the claim is closed, because legal proceedings may start long after a
payment.

## Personal data

Contact details of customer staff are deleted 2 years after the customer's last order, unless a contract requires a
longer period. Requests to see or delete personal data are answered within 30 days.

## Camera footage

Depot camera footage is kept for 30 days and then overwritten, unless it is needed for an open claim or incident.

## Backups

Backups of the operational database are encrypted and kept for 90 days. Restoring a backup requires the approval of
the head of IT.

## Deletion

When a retention period ends, the records are deleted in the monthly clean-up run. A record under a legal hold is kept
until the legal team lifts the hold, and the hold is noted on the record.
""",
    "credit_terms.md": f"""# Customer Credit Terms

## Payment terms

Standard payment terms are {STANDARD_TERMS_DAYS} days from the invoice date. Key accounts may be granted payment
terms of {KEY_ACCOUNT_TERMS_DAYS} days. Any other terms are an exception and must be approved by the chief financial
officer.

## Credit limits

Every customer has a credit limit in euros, set when the account is opened and reviewed every year. A credit limit
above EUR {CREDIT_SIGNOFF_EUR:,} requires sign-off by the finance director.

## Late payment

Interest of 8% above the central bank's reference rate is charged on overdue invoices. Accounts that are more than
60 days overdue are put on stop: no new bookings are accepted until the balance is paid.

## Disputes

An invoice dispute must be raised within 15 days of the invoice date. The undisputed part of the invoice remains due
on the normal date. Credit control answers a dispute within 5 working days and records the outcome on the account.
""",
    "escalation.md": f"""# Escalation Policy

## Claims

A claim that has been open for more than {ESCALATION_DAYS} days is escalated to the operations director, who decides
it within 10 working days. The claims handler records the escalation in the claims system.

## Complaints

Customer complaints are acknowledged on the day they are received and answered within 2 working days. A complaint
that is not resolved within 10 working days goes to the customer service manager.

## Service failures

A carrier that misses more than three collections for the same customer in one month is reported to the procurement
team, which decides whether to move the customer's volume to another carrier.

## Safety incidents

Every safety incident is reported to the safety officer the same day. An incident with an injury is escalated to the
managing director immediately. The safety officer writes an incident report within 5 working days, naming the cause
and the measures taken.
""",
    "fuel_surcharge.md": f"""# Fuel Surcharge Policy

## The surcharge

A fuel surcharge of {FUEL_SURCHARGE_PCT}% is added to the base freight charge of every shipment. The surcharge is
shown as a separate line on the invoice.

## Review

The surcharge rate is reviewed monthly against the national diesel price index. A change of the rate is announced to
customers at least 14 days before it applies, and it applies to shipments collected from that date.

## What it applies to

The surcharge applies to the base freight charge only. Credits for severe delays are calculated on the base freight
charge without the surcharge, and the surcharge is not charged on declared-value cover.

## Contracts

Customers with a fixed-price contract pay the surcharge only when their contract says so; the account manager keeps
a list of these contracts. A customer may ask for the calculation behind the current rate at any time, and the pricing
team sends it within 5 working days.
""",
    "warehouse_safety.md": """# Warehouse Safety Rules

## Personal protection

Everyone on the warehouse floor wears a high-visibility vest and safety shoes at all times. Visitors are accompanied
by a member of staff.

## Storage

Pallets may be stacked no more than 3 levels high in block storage. Racking is inspected every 6 months, and damaged
racking is taken out of use until it is repaired.

## Forklift trucks

Only certified forklift operators may use a forklift truck, and the certificate is renewed every 3 years. The speed
limit inside the warehouse is 10 km/h. Pedestrian walkways are marked in green and are never used for storage.

## Hazardous goods

Hazardous goods are stored in the marked hazardous area only, separated by class, with spill kits within reach.

## Reporting

Every near miss is reported on the day it happens, so that the causes can be removed before someone is hurt. The
warehouse manager reviews all near misses every week with the shift leaders.
""",
}


def _unwrap(text: str) -> str:
    """One line per paragraph (the source wraps them at 120 columns), so a sentence is a substring of the file."""
    return "\n\n".join(" ".join(block.split("\n")) for block in text.strip().split("\n\n")) + "\n"


def policy_documents() -> dict[str, str]:
    """File name -> Markdown text of each policy document, in a fixed order; one line per paragraph."""
    return {name: _unwrap(text) for name, text in _DOCS.items()}
