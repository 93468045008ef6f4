//! A cache of one kind of cluster object, kept by listing then watching it (kube-rs's watcher:
//! resource versions, bookmarks, a relist when the watch breaks or its version expires).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;

use crate::events::ClusterEvents;

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

    /// Takes the object named `name` out of its name and its group, if it is there.
    fn remove(&mut self, name: &str) {
        let Some(old) = self.by_name.remove(name) else {
            return;
        };
        if let Some(members) = self.by_group.get_mut(old.group()) {
            members.remove(name);
            if members.is_empty() {
                self.by_group.remove(old.group());
            }
        }
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
    /// keeping it. A failed list or watch is logged, told to `events`, and tried again after
    /// kube-rs's backoff (0.8 s doubling to 30 s); an object that does not decode as `T` is
    /// logged and left out.
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
        let kept = Arc::clone(&cache);
        events.cache_started(resource.plural);
        let task = tokio::spawn(async move {
            let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
            let mut stream = std::pin::pin!(stream);
            let mut relisted: Option<Objects<T>> = None;
            while let Some(event) = stream.next().await {
                match event {
                    Ok(Event::Init) => relisted = Some(Objects::default()),
                    Ok(Event::InitApply(object)) => {
                        if let (Some(objects), Some((name, value))) =
                            (relisted.as_mut(), kept.decode(object))
                        {
                            objects.insert(name, value);
                        }
                    }
                    Ok(Event::InitDone) => {
                        if let Some(objects) = relisted.take() {
                            let count = objects.by_name.len();
                            *kept.write() = objects;
                            if !kept.synced.swap(true, Ordering::AcqRel) {
                                tracing::info!(resource = resource.plural, count, "cache synced");
                                events.cache_synced(resource.plural);
                            }
                        }
                        events.cache_updated(resource.plural);
                    }
                    Ok(Event::Apply(object)) => {
                        if let Some((name, value)) = kept.decode(object) {
                            kept.write().insert(name, value);
                            events.cache_updated(resource.plural);
                        }
                    }
                    Ok(Event::Delete(object)) => {
                        if let Some(name) = object.metadata.name {
                            kept.write().remove(&name);
                            events.cache_updated(resource.plural);
                        }
                    }
                    Err(error) => {
                        tracing::warn!(
                            resource = resource.plural,
                            synced = kept.is_synced(),
                            "listing or watching failed, trying again: {}",
                            crate::admission::error_chain(&error)
                        );
                        events.watch_failed(resource.plural);
                    }
                }
            }
        });
        (cache, Watching(task))
    }

    /// The object's name and its value as `T`; `None`, logged, when it has no name or does not
    /// decode.
    fn decode(&self, object: DynamicObject) -> Option<(String, Arc<T>)> {
        let name = object.metadata.name.clone()?;
        let decoded = serde_json::to_value(&object).and_then(serde_json::from_value::<T>);
        match decoded {
            Ok(value) => Some((name, Arc::new(value))),
            Err(error) => {
                tracing::warn!(
                    resource = self.resource.plural,
                    name,
                    "left out of the cache: {error}"
                );
                None
            }
        }
    }
}
