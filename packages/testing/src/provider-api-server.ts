import { once } from "node:events";
import { createServer, type ServerResponse } from "node:http";

/** One call the scripted provider API received. */
export interface ProviderApiCall {
  method: string;
  path: string;
  /** Whether its Authorization carried one of the accepted tokens. */
  authorized: boolean;
  body: Record<string, unknown>;
}

export interface ProviderApiServer {
  /** GIT_API_URL_GITHUB and GIT_API_URL_BITBUCKET. */
  githubUrl: string;
  bitbucketUrl: string;
  /** GIT_API_URL_GITLAB (the client adds /api/v4 itself). */
  gitlabUrl: string;
  calls: ProviderApiCall[];
  close: () => Promise<void>;
}

const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
};

/**
 * The pull-request part of the GitHub, GitLab and Bitbucket REST APIs, answering as they do, and
 * recording every call: what the worker's clients (@octokit/rest, @gitbeaker/rest, fetch) send.
 * `tokens` are the ones it accepts (as a Bearer token, GitHub's `token x`, or GitLab's PRIVATE-TOKEN).
 */
export const startProviderApiServer = async (opts: { tokens: string[] }): Promise<ProviderApiServer> => {
  const calls: ProviderApiCall[] = [];
  const open = new Map<string, { number: number; url: string; head: string; base: string }[]>();
  let next = 41;
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString("utf8");
    let body: Record<string, unknown> = {};
    try {
      body = raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
    } catch {
      body = { raw };
    }
    const url = new URL(req.url ?? "/", "http://x");
    const auth = String(req.headers.authorization ?? "").replace(/^(Bearer|token)\s+/i, "");
    const token = auth || String(req.headers["private-token"] ?? "");
    const authorized = opts.tokens.includes(token);
    calls.push({ method: req.method ?? "", path: url.pathname, authorized, body });
    const host = `http://${req.headers.host}`;

    // GitHub: POST/GET /repos/{owner}/{repo}/pulls
    const gh = url.pathname.match(/^\/repos\/([^/]+)\/([^/]+)\/pulls$/);
    if (gh) {
      if (!authorized) return json(res, 401, { message: "Bad credentials", status: "401" });
      const repo = `${gh[1]}/${gh[2]}`;
      const list = open.get(repo) ?? [];
      if (req.method === "GET") {
        const head = url.searchParams.get("head")?.split(":").pop();
        return json(
          res,
          200,
          list
            .filter((p) => !head || p.head === head)
            .map((p) => ({ number: p.number, html_url: p.url, state: "open" })),
        );
      }
      const head = String(body.head ?? "");
      const base = String(body.base ?? "");
      if (list.some((p) => p.head === head && p.base === base)) {
        return json(res, 422, {
          message: "Validation Failed",
          errors: [
            { resource: "PullRequest", code: "custom", message: `A pull request already exists for ${gh[1]}:${head}.` },
          ],
        });
      }
      const pr = { number: next++, url: `${host}/${repo}/pull/${next - 1}`, head, base };
      open.set(repo, [...list, pr]);
      return json(res, 201, {
        number: pr.number,
        html_url: pr.url,
        state: "open",
        head: { ref: head },
        base: { ref: base },
      });
    }

    // GitLab: POST/GET /api/v4/projects/{id}/merge_requests
    const gl = url.pathname.match(/^\/api\/v4\/projects\/([^/]+)\/merge_requests$/);
    if (gl) {
      if (!authorized) return json(res, 401, { message: "401 Unauthorized" });
      const repo = decodeURIComponent(gl[1] ?? "");
      const list = open.get(repo) ?? [];
      if (req.method === "GET") {
        return json(
          res,
          200,
          list.map((p) => ({ iid: p.number, web_url: p.url, state: "opened" })),
        );
      }
      const head = String(body.source_branch ?? "");
      const base = String(body.target_branch ?? "");
      if (list.some((p) => p.head === head && p.base === base)) {
        return json(res, 409, { message: ["Another open merge request already exists for this source branch"] });
      }
      const pr = { number: next++, url: `${host}/${repo}/-/merge_requests/${next - 1}`, head, base };
      open.set(repo, [...list, pr]);
      return json(res, 201, { iid: pr.number, web_url: pr.url, state: "opened" });
    }

    // Bitbucket: POST /repositories/{workspace}/{repo}/pullrequests
    const bb = url.pathname.match(/^\/repositories\/([^/]+)\/([^/]+)\/pullrequests$/);
    if (bb && req.method === "POST") {
      if (!authorized) return json(res, 401, { type: "error", error: { message: "Unauthorized" } });
      const id = next++;
      return json(res, 201, { id, links: { html: { href: `${host}/${bb[1]}/${bb[2]}/pull-requests/${id}` } } });
    }
    json(res, 404, { message: "Not Found" });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  const base = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
  return {
    githubUrl: base,
    bitbucketUrl: base,
    gitlabUrl: base,
    calls,
    async close() {
      server.closeAllConnections();
      server.close();
    },
  };
};
