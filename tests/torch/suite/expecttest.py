"""A minimal stand-in for the `expecttest` package, which torch's test harness
(torch.testing._internal.common_utils) imports but Debian 12 does not package.

Only what the harness touches is here: the ACCEPT flag and a TestCase base class.
The `_DistTestBase` tests never compare against inline expectations, so
assertExpectedInline is a plain equality check (no rewriting of sources)."""
import os
import unittest

ACCEPT = os.getenv("EXPECTTEST_ACCEPT", "") not in ("", "0")


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):
        self.assertMultiLineEqual(expect, actual)

    def assertExpectedRaisesInline(self, exc_type, callable, expect, *args, **kwargs):
        try:
            callable(*args, **kwargs)
        except exc_type as e:
            self.assertExpectedInline(str(e), expect)
            return
        self.fail(msg="Did not raise when expected to")
