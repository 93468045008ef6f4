//! The image allowlist rule `execution_allowlist.images` and the executor policy's
//! `images.allowed` share: a prefix, or a repository without tag or digest.

/// Whether `image` matches an entry of an image allowlist.
///
/// An entry ending in `/` matches every image that starts with it (`ghcr.io/acme/`); any other
/// entry must equal the image's repository, the image without its `:tag` and `@digest`
/// (`ghcr.io/acme/etl` matches `ghcr.io/acme/etl:1.2` and `ghcr.io/acme/etl@sha256:...`, not
/// `ghcr.io/acme/etl-evil`). A registry port (`localhost:5000/app:1`) is not taken for a tag.
pub fn image_allowed(image: &str, allowed: &[String]) -> bool {
    let repository = image_repository(image);
    allowed.iter().any(|entry| {
        if entry.ends_with('/') {
            image.starts_with(entry.as_str())
        } else {
            entry == repository
        }
    })
}

/// The image without its `@digest` and `:tag`: `localhost:5000/app:1` gives
/// `localhost:5000/app`.
pub fn image_repository(image: &str) -> &str {
    let without_digest = image.split_once('@').map_or(image, |(name, _)| name);
    let last_slash = without_digest.rfind('/').map_or(0, |slash| slash + 1);
    match without_digest[last_slash..].find(':') {
        Some(colon) => &without_digest[..last_slash + colon],
        None => without_digest,
    }
}

#[cfg(test)]
mod tests {
    use super::image_repository;

    #[test]
    fn repository_drops_tag_and_digest_but_keeps_a_registry_port() {
        assert_eq!(image_repository("python:3.12"), "python");
        assert_eq!(
            image_repository("ghcr.io/acme/etl@sha256:abc"),
            "ghcr.io/acme/etl"
        );
        assert_eq!(
            image_repository("ghcr.io/acme/etl:1@sha256:abc"),
            "ghcr.io/acme/etl"
        );
        assert_eq!(image_repository("localhost:5000/etl"), "localhost:5000/etl");
        assert_eq!(
            image_repository("localhost:5000/etl:2"),
            "localhost:5000/etl"
        );
    }
}
