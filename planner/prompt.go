package planner

// ReviewerParagraph closes every reviewer node's prompt. kewplan writes it, not the configuration, so every
// reviewer is told the same absolute sidecar path and schema; it is part of the prompt's digest. The path is
// absolute because the agent's working directory may be any subdirectory of the mount (#1026), and a relative
// name would write the verdict where kewplan never looks.
const ReviewerParagraph = `When you have finished your review, write your verdict as a JSON file at the absolute path ` +
	VerdictMountPath + ` (exactly this path, whatever your working directory). It must hold one JSON object of this shape:
{"verdict": "approve"|"request_changes"|"reject", "summary": "...", "findings": [{"path": "...", "line": 0, "message": "..."}]}
Use "approve" only when the change can merge as it is. kewplan reads only this file: a missing or unreadable verdict holds the change for a human.
`
