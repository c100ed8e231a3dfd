// Package config reads kewplan's HCL configuration language into a static model in which every value keeps its
// source range, and evaluates expressions (variables, locals, functions, node outputs) on request.
//
// It reads HCL files, variable files and the files named by file() and templatefile(), through an fs.FS the
// caller supplies, and nothing else: it never talks to Docker or git, never reads the process environment (the
// caller passes KEWPLAN_VAR_* values in) and knows nothing about runners' credentials or fail-closed rules,
// which belong to the planner.
package config
