// Key storage for end-to-end encryption: the device's private MLS state
// (KeyPackages' private keys, each group's state, decrypted texts) behind
// one small interface, so that an app can keep it where it keeps secrets.

/**
 * Where a device keeps its MLS secrets. Keys are short strings; values are
 * bytes. Everything in it is private to the device: never send it to a
 * server. Losing it means the device must publish fresh KeyPackages (it
 * does so with `replace`) and be added to its groups again.
 */
export interface KeyStore {
  get(key: string): Promise<Uint8Array | undefined>;
  put(key: string, value: Uint8Array): Promise<void>;
  delete(key: string): Promise<void>;
  /** The keys starting with prefix. */
  keys(prefix: string): Promise<string[]>;
}

/** A KeyStore in memory: for tests and for processes that do not persist keys. */
export class MemoryKeyStore implements KeyStore {
  private readonly m = new Map<string, Uint8Array>();
  async get(key: string): Promise<Uint8Array | undefined> {
    return this.m.get(key);
  }
  async put(key: string, value: Uint8Array): Promise<void> {
    this.m.set(key, value);
  }
  async delete(key: string): Promise<void> {
    this.m.delete(key);
  }
  async keys(prefix: string): Promise<string[]> {
    return [...this.m.keys()].filter((k) => k.startsWith(prefix));
  }
}

/**
 * A KeyStore in the browser's IndexedDB, one database per name (use one per
 * user and device, e.g. `parley-e2ee/alice/web-1`). Values are stored as
 * bytes, never exported.
 */
export class IndexedDBKeyStore implements KeyStore {
  private db: Promise<IDBDatabase> | null = null;
  constructor(private readonly name: string, private readonly idb: IDBFactory = globalThis.indexedDB) {
    if (!idb) throw new Error('parley: IndexedDB is not available here (use MemoryKeyStore or your own KeyStore)');
  }

  private open(): Promise<IDBDatabase> {
    return (this.db ??= new Promise((resolve, reject) => {
      const r = this.idb.open(this.name, 1);
      r.onupgradeneeded = () => r.result.createObjectStore('kv');
      r.onsuccess = () => resolve(r.result);
      r.onerror = () => reject(r.error);
    }));
  }

  private async run<T>(mode: IDBTransactionMode, f: (s: IDBObjectStore) => IDBRequest): Promise<T> {
    const db = await this.open();
    return new Promise<T>((resolve, reject) => {
      const tx = db.transaction('kv', mode);
      const r = f(tx.objectStore('kv'));
      tx.oncomplete = () => resolve(r.result as T);
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error);
    });
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    const v = await this.run<ArrayBuffer | Uint8Array | undefined>('readonly', (s) => s.get(key));
    return v === undefined ? undefined : new Uint8Array(v);
  }
  async put(key: string, value: Uint8Array): Promise<void> {
    await this.run('readwrite', (s) => s.put(value.slice(), key));
  }
  async delete(key: string): Promise<void> {
    await this.run('readwrite', (s) => s.delete(key));
  }
  async keys(prefix: string): Promise<string[]> {
    const range = IDBKeyRange.bound(prefix, prefix + '\uffff');
    const ks = await this.run<IDBValidKey[]>('readonly', (s) => s.getAllKeys(range));
    return ks.map(String);
  }

  /** Closes the database (a later call opens it again). */
  close(): void {
    void this.db?.then((d) => d.close());
    this.db = null;
  }
}
