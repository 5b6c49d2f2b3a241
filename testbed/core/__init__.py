"""The floor every other package stands on, importing none of them: errors, units, atomic
files, the typed fabric and experiment specs, the fabric plan, the policy table, the job record
and job -> worker contract, and what every run directory holds."""
