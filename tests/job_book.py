"""The controller's API backend minus OpenFlow, for tests: a real JobManager behind it."""

from __future__ import annotations

from sdn_app.jobs import JobManager


class JobBook:
    """What the controller answers the API with, minus switches (no port statistics)."""

    def __init__(self, jobs: JobManager) -> None:
        self.jobs = jobs

    def health(self):
        return {"ok": True}

    def topology(self):
        return self.jobs.plan.to_dict()

    def list_jobs(self):
        return self.jobs.list_jobs()

    def create_job(self, req):
        return self.jobs.create(req)[0]

    def delete_job(self, job_id):
        return self.jobs.delete(job_id)[0]

    def circuits(self):
        return self.jobs.circuits()

    def ports(self):
        return {}
