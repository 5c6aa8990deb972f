"""The monitoring scenario: a package, so its scenario fixture (scope "package") ends,
with its node and operator, before the next tests on the same worker."""
