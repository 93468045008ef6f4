//! A cache of one kind of cluster object, kept by listing then watching it (kube-rs's watcher:
//! resource versions, bookmarks, a relist when the watch breaks or its version expires).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::{self, DefaultBackoff, Event};
use serde::de::DeserializeOwned;

use crate::events::ClusterEvents;

/// The wait after a failure should a backoff ever stop answering: kube-rs's longest.
const LONGEST_BACKOFF: Duration = Duration::from_secs(30);

/// A kind of cluster-scoped object to cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// The API group, such as `scheduling.volcano.sh`.
    pub group: &'static str,
    /// The version, such as `v1beta1`.
    pub version: &'static str,
    /// The kind, such as `Queue`.
    pub kind: &'static str,
    /// The plural in the URL, such as `queues`; also the name logs and events give the cache.
    pub plural: &'static str,
}

/// Volcano's queues, `scheduling.volcano.sh/v1beta1`, cluster-scoped.
pub const QUEUES: Resource = Resource {
    group: "scheduling.volcano.sh",
    version: "v1beta1",
    kind: "Queue",
    plural: "queues",
};

/// What a [`Cache`] files an object under besides its name, so that the members of a group
/// are found without looking at every object: a queue under its parent.
pub trait Grouped {
    /// The key of the object's group, such as a queue's `spec.parent`.
    fn group(&self) -> &str;
}

/// The objects of one kind by name, as last listed and watched, decoded as `T`, and by group
/// ([`Grouped`]).
///
/// A lookup takes a read lock that an update holds only to insert or remove one object, or to
/// swap in a whole relisted set built beside it.
#[derive(Debug)]
pub struct Cache<T> {
    resource: Resource,
    objects: RwLock<Objects<T>>,
    synced: AtomicBool,
}

/// The cached objects, by name and by group.
#[derive(Debug)]
struct Objects<T> {
    by_name: HashMap<String, Arc<T>>,
    /// Each group's members by name, in name order.
    by_group: HashMap<String, BTreeMap<String, Arc<T>>>,
}

impl<T> Default for Objects<T> {
    fn default() -> Self {
        Objects {
            by_name: HashMap::new(),
            by_group: HashMap::new(),
        }
    }
}

impl<T: Grouped> Objects<T> {
    /// Files `value` under `name` and its group, in place of what was there.
    fn insert(&mut self, name: String, value: Arc<T>) {
        self.remove(&name);
        self.by_group
            .entry(value.group().to_owned())
            .or_default()
            .insert(name.clone(), Arc::clone(&value));
        self.by_name.insert(name, value);
    }

    /// Takes the object named `name` out of its name and its group, if it is there; whether
    /// it was.
    fn remove(&mut self, name: &str) -> bool {
        let Some(old) = self.by_name.remove(name) else {
            return false;
        };
        if let Some(members) = self.by_group.get_mut(old.group()) {
            members.remove(name);
            if members.is_empty() {
                self.by_group.remove(old.group());
            }
        }
        true
    }
}

/// The task keeping a [`Cache`]; dropping it stops the watch (the cache keeps what it holds).
#[derive(Debug)]
pub struct Watching(tokio::task::JoinHandle<()>);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> Cache<T> {
    /// A cache of `resource` that nothing fills: empty and never synced, for a service that is
    /// registered but not served.
    pub fn unwatched(resource: Resource) -> Arc<Cache<T>> {
        Arc::new(Cache {
            resource,
            objects: RwLock::new(Objects::default()),
            synced: AtomicBool::new(false),
        })
    }

    /// The object named `name`, if the cache holds one.
    pub fn get(&self, name: &str) -> Option<Arc<T>> {
        self.read().by_name.get(name).cloned()
    }

    /// Every object the cache holds, in no particular order.
    pub fn all(&self) -> Vec<Arc<T>> {
        self.read().by_name.values().cloned().collect()
    }

    /// The members of the group `key` ([`Grouped::group`]) in name order; only they are looked
    /// at.
    pub fn group(&self, key: &str) -> Vec<Arc<T>> {
        self.read()
            .by_group
            .get(key)
            .map(|members| members.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether the cache has held a complete list at least once: until then its answers would
    /// be guesses, and no review reads it.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// What it caches.
    pub fn resource(&self) -> Resource {
        self.resource
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Objects<T>> {
        // Nothing done under the lock panics (a failed allocation aborts), so a poisoned lock
        // still guards objects filed by name and by group alike.
        self.objects.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Objects<T>> {
        self.objects.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: Grouped + DeserializeOwned + Send + Sync + 'static> Cache<T> {
    /// Starts listing and watching `resource` with `client` on the current tokio runtime, and
    /// returns the cache (empty and not synced until the first list is whole) and the task
    /// keeping it. A failed list or watch (one that ended at once without an event included:
    /// the client [`super::connect`] makes fails it) is logged, told to `events`, and tried
    /// again after kube-rs's backoff (0.8 s doubling to 30 s, each wait up to twice that at
    /// random), which
    /// grows over failures in a row and starts again only once the cache receives something:
    /// a whole list, or an object added, changed or deleted. An object that does not decode
    /// as `T` is logged and left out: from a list, and from a change, whose earlier version is
    /// then removed too, so that the cache never answers with a version the cluster no longer
    /// holds.
    pub fn watch(
        client: kube::Client,
        resource: Resource,
        events: Arc<dyn ClusterEvents>,
    ) -> (Arc<Cache<T>>, Watching) {
        let cache = Cache::unwatched(resource);
        let api_resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(resource.group, resource.version, resource.kind),
            resource.plural,
        );
        let api: Api<DynamicObject> = Api::all_with(client, &api_resource);
        events.cache_started(resource.plural);
        let stream = watcher::watcher(api, watcher::Config::default());
        let task = tokio::spawn(Arc::clone(&cache).keep(stream, DefaultBackoff::default(), events));
        (cache, Watching(task))
    }

    /// Fills the cache from `stream` (a watcher's events) until it ends, waiting after each
    /// failure for `backoff`'s next delay before asking the stream for more.
    ///
    /// kube-rs's own `StreamBackoff` resets its backoff on every event that is not a failure,
    /// and the watcher starts each list attempt with [`Event::Init`], so a list failing for
    /// ever would be retried at the first delay for ever. Here the backoff starts again only
    /// on what shows the API server answering: a whole list ([`Event::InitDone`]) or a watched
    /// change ([`Event::Apply`], [`Event::Delete`]).
    async fn keep<S, B>(self: Arc<Self>, stream: S, mut backoff: B, events: Arc<dyn ClusterEvents>)
    where
        S: Stream<Item = Result<Event<DynamicObject>, watcher::Error>>,
        B: Backoff,
    {
        let plural = self.resource.plural;
        let mut stream = std::pin::pin!(stream);
        let mut relisted: Option<Objects<T>> = None;
        while let Some(event) = stream.next().await {
            match event {
                Ok(Event::Init) => relisted = Some(Objects::default()),
                Ok(Event::InitApply(object)) => {
                    let (Some(objects), Some((name, decoded))) =
                        (relisted.as_mut(), Self::decode(object))
                    else {
                        continue;
                    };
                    match decoded {
                        Ok(value) => objects.insert(name, value),
                        Err(error) => {
                            tracing::warn!(
                                resource = plural,
                                name,
                                "left out of the cache: {error}"
                            );
                        }
                    }
                }
                Ok(Event::InitDone) => {
                    backoff.reset();
                    if let Some(objects) = relisted.take() {
                        let count = objects.by_name.len();
                        *self.write() = objects;
                        if !self.synced.swap(true, Ordering::AcqRel) {
                            tracing::info!(resource = plural, count, "cache synced");
                            events.cache_synced(plural);
                        }
                    }
                    events.cache_updated(plural);
                }
                Ok(Event::Apply(object)) => {
                    backoff.reset();
                    let Some((name, decoded)) = Self::decode(object) else {
                        continue;
                    };
                    match decoded {
                        Ok(value) => self.write().insert(name, value),
                        Err(error) => {
                            // Kept, the earlier version would answer for an object that is no
                            // longer as it was (an Open queue now Closed, say): left out, as a
                            // relist leaves it out.
                            let earlier_removed = self.write().remove(&name);
                            tracing::warn!(
                                resource = plural,
                                name,
                                earlier_removed,
                                "changed object left out of the cache: {error}"
                            );
                        }
                    }
                    events.cache_updated(plural);
                }
                Ok(Event::Delete(object)) => {
                    backoff.reset();
                    if let Some(name) = object.metadata.name {
                        self.write().remove(&name);
                        events.cache_updated(plural);
                    }
                }
                Err(error) => {
                    // kube's default backoff never gives up; should one, try at its longest.
                    let delay = backoff.next().unwrap_or(LONGEST_BACKOFF);
                    tracing::warn!(
                        resource = plural,
                        synced = self.is_synced(),
                        retry_in = ?delay,
                        "listing or watching failed, trying again: {}",
                        crate::admission::error_chain(&error)
                    );
                    events.watch_failed(plural);
                    // The watcher does nothing between polls: not polling it is the wait.
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    /// The object's name and its value as `T`, or why it does not decode as `T`; `None` when
    /// it has no name.
    fn decode(object: DynamicObject) -> Option<(String, Result<Arc<T>, serde_json::Error>)> {
        let name = object.metadata.name.clone()?;
        let decoded = serde_json::to_value(&object).and_then(serde_json::from_value::<T>);
        Some((name, decoded.map(Arc::new)))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use kube::api::ObjectMeta;
    use tokio::time::Instant;

    use super::*;

    /// An object of no particular shape, in no group.
    #[derive(Debug, serde::Deserialize)]
    struct Anything {}

    impl Grouped for Anything {
        fn group(&self) -> &str {
            ""
        }
    }

    /// Waits 1 s after the first failure, doubling after each, until reset.
    #[derive(Default)]
    struct Doubling {
        failures: u32,
    }

    impl Iterator for Doubling {
        type Item = Duration;

        fn next(&mut self) -> Option<Duration> {
            let delay = Duration::from_secs(1 << self.failures);
            self.failures += 1;
            Some(delay)
        }
    }

    impl Backoff for Doubling {
        fn reset(&mut self) {
            self.failures = 0;
        }
    }

    /// What the scripted watcher yields next.
    enum Step {
        Init,
        InitDone,
        Apply,
        Delete,
        Fail,
    }

    fn object() -> DynamicObject {
        DynamicObject {
            types: None,
            metadata: ObjectMeta {
                name: Some("q".to_owned()),
                ..ObjectMeta::default()
            },
            data: serde_json::json!({}),
        }
    }

    /// Runs a cache over a watcher that yields `script`, on the paused clock, and returns the
    /// seconds from the start at which each step was taken from the watcher.
    async fn polled_at(script: Vec<Step>) -> Vec<u64> {
        let start = Instant::now();
        let taken = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&taken);
        let stream = futures::stream::unfold(VecDeque::from(script), move |mut script| {
            let recorded = Arc::clone(&recorded);
            async move {
                let step = script.pop_front()?;
                recorded
                    .lock()
                    .expect("taken")
                    .push((Instant::now() - start).as_secs());
                let event = match step {
                    Step::Init => Ok(Event::Init),
                    Step::InitDone => Ok(Event::InitDone),
                    Step::Apply => Ok(Event::Apply(object())),
                    Step::Delete => Ok(Event::Delete(object())),
                    Step::Fail => Err(watcher::Error::NoResourceVersion),
                };
                Some((event, script))
            }
        });
        let cache = Cache::<Anything>::unwatched(QUEUES);
        cache
            .keep(stream, Doubling::default(), Arc::new(crate::events::Ignore))
            .await;
        taken.lock().expect("taken").clone()
    }

    #[tokio::test(start_paused = true)]
    async fn failed_lists_in_a_row_wait_longer_each_time_though_each_attempt_starts_with_init() {
        use Step::*;

        let taken = polled_at(vec![Init, Fail, Init, Fail, Init, Fail, Init]).await;

        // Each attempt's Init comes after the wait: 1 s, then 2 s, then 4 s; never 1 s again.
        assert_eq!(taken, [0, 0, 1, 1, 3, 3, 7]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_whole_list_or_a_watched_change_starts_the_backoff_again_and_nothing_else_does() {
        use Step::*;

        let taken = polled_at(vec![
            Init, Fail, Init, Fail, Init, InitDone, Fail, Fail, Apply, Fail, Delete, Fail, Init,
        ])
        .await;

        // 1 s, 2 s; reset by the whole list: 1 s, 2 s; reset by the change: 1 s; by the
        // deletion: 1 s.
        assert_eq!(taken, [0, 0, 1, 1, 3, 3, 3, 4, 6, 6, 7, 7, 8]);
    }

    #[tokio::test(start_paused = true)]
    async fn kube_s_default_backoff_doubles_from_0_8_s_to_30_s_and_starts_again_when_reset() {
        let mut backoff = DefaultBackoff::default();
        let mut floor = Duration::from_millis(800);

        for _ in 0..8 {
            let delay = backoff.next().expect("never gives up");
            // Jitter adds up to the delay again.
            assert!(
                delay >= floor && delay < floor * 2,
                "{delay:?} for {floor:?}"
            );
            floor = (floor * 2).min(LONGEST_BACKOFF);
        }
        backoff.reset();
        let again = backoff.next().expect("never gives up");

        assert!(again < Duration::from_millis(1600), "{again:?}");
    }
}
