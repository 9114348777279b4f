/**
 * An endpoint URL as leaseq prints it: a user and password written into it (`http://user:pw@host`, as
 * some proxies and tunnels are reached) are shown as `***`, everywhere an endpoint reaches a terminal, a
 * log line or an error. The URL the clients use is left as it was. Pure, no imports.
 */
export function endpointText(url: string): string {
  // Up to the last @ before the path, as URL parsers read it: a password may hold an @ of its own.
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#]*@/i, '$1***@');
}
