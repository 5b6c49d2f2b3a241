"""Training iterations as ASTRA-sim 1.0 describes them: the typed workload (:mod:`.model`), its
text reader (:mod:`.astra_text`), the platform it runs on (:mod:`.platform`), the chunks of
each collective (:mod:`.collectives`) and the event-driven replay (:mod:`.replay`)."""
