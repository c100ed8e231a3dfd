policy {
  provider_fetch = ["web_search", "url_sources"]
}
