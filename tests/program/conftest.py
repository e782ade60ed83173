"""The program's fixtures (`as_pulumi_host`, `exports`) for every module of this folder."""

from tests.program.test_program import as_pulumi_host, exports

__all__ = ["as_pulumi_host", "exports"]
