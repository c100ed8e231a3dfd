// Package planfile writes and reads saved plans (`kewplan plan --out FILE`), checks that one is not stale, and
// re-plans it for `apply PLANFILE`, as Terraform keeps plans/planfile apart from the plan model. The document (and
// its saved object) is jsonplan's; this package is the only one that turns it into a file and back, so that what
// apply runs is exactly what was reviewed. It prints nothing.
package planfile
