policy {
  require_pinned_images = true
  credentials = {
    ANTHROPIC_API_KEY = ["claude-code"]
  }
  max_pids_limit = 256
}
