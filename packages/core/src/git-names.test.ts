import { describe, expect, it } from "vitest";
import { isSafeBranchName, parseRepositoryName } from "./git-names.ts";
import { startRequestSchema } from "./schemas/start-request.ts";

describe("parseRepositoryName", () => {
  it.each(["All-Hands-AI/OpenHands", "a/b.js", "user_1/repo-2", "x/.github", "_acme/app"])("accepts %s", (raw) => {
    expect(parseRepositoryName(raw, "github")).not.toBeNull();
  });

  it("names the workspace after the last segment, without .git", () => {
    expect(parseRepositoryName("acme/app.git", "github")).toEqual({ fullName: "acme/app.git", name: "app" });
    expect(parseRepositoryName("g/sub/app", "gitlab")).toEqual({ fullName: "g/sub/app", name: "app" });
  });

  it("lets GitLab alone nest groups", () => {
    expect(parseRepositoryName("group/sub/repo", "gitlab")).not.toBeNull();
    expect(parseRepositoryName("group/sub/repo", "github")).toBeNull();
    expect(parseRepositoryName("group/sub/repo", "bitbucket")).toBeNull();
    expect(parseRepositoryName(Array.from({ length: 11 }, (_, i) => `g${i}`).join("/"), "gitlab")).toBeNull();
  });

  it.each([
    "octocat",
    "../etc",
    "a/..",
    "a/.",
    "-x/y",
    "x/-y",
    "x/.git",
    "x/y.lock",
    "x./y",
    "x/y.",
    "https://github.com/a/b",
    "a/b c",
    "/a",
    "a/",
    "a//b",
    "acme/app:1",
  ])("refuses %s on any provider", (raw) => {
    for (const provider of ["github", "gitlab", "bitbucket"] as const) {
      expect(parseRepositoryName(raw, provider), provider).toBeNull();
    }
  });
});

describe("isSafeBranchName", () => {
  it.each(["main", "release/v1.2.3", "feat/ünïcode", "HEAD-1"])("accepts %s", (name) => {
    expect(isSafeBranchName(name)).toBe(true);
  });

  it.each(["", "-b", "a..b", "a:b", "a b", "/x", "x/", "x.", "x.lock", "@", "a@{1}", ".hidden", "a/.b", "a//b"])(
    "refuses %s",
    (name) => {
      expect(isSafeBranchName(name)).toBe(false);
    },
  );
});

describe("startRequestSchema", () => {
  const repositoryIssue = (body: unknown) => {
    const result = startRequestSchema.safeParse(body);
    return result.success ? null : result.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
  };

  it("checks the repository's form for its provider", () => {
    expect(repositoryIssue({ selected_repository: "group/sub/repo", git_provider: "gitlab" })).toBeNull();
    expect(repositoryIssue({ selected_repository: "group/sub/repo" })).toEqual([
      "selected_repository: must be of the form owner/repo",
    ]);
    expect(repositoryIssue({ selected_repository: "group", git_provider: "gitlab" })).toEqual([
      "selected_repository: must be of the form group/repo or group/subgroup/repo",
    ]);
  });

  it("drops unknown fields and keeps the rest as given", () => {
    const request = { title: "t", selected_repository: "acme/app", selected_branch: "main", extra: 1 };
    expect(startRequestSchema.parse(request)).toEqual({
      title: "t",
      selected_repository: "acme/app",
      selected_branch: "main",
    });
  });
});
