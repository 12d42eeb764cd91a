package io.lancespark.table.filter

import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.format.stats.{PageStat, PageStatistics}

class StatisticsCacheSuite extends AnyFunSuite {

  private def stats(pages: Int): Option[PageStatistics] =
    Some(PageStatistics(Vector.tabulate(pages)(i => PageStat(0, 0, i, i * 10L, 10L, 0L, Some(i.toLong), Some(i + 9L)))))

  test("a file's statistics are loaded once; the least recently used files go first past the bound") {
    val cache = new StatisticsCache(maxPages = 5)
    var loads = Vector.empty[String]
    def get(path: String, pages: Int): Option[PageStatistics] =
      cache.getOrLoad("file:/d", path, 100)({ loads :+= path; stats(pages) })
    assert(get("a", 2) == stats(2))
    get("b", 2)
    assert(get("a", 2) == stats(2))            // kept: not loaded again, and now the most recent
    assert(loads == Vector("a", "b") && cache.size == (2, 4L))
    get("c", 2)                                // 6 pages > 5: b (least recently used) goes
    assert(cache.size == (2, 4L))
    get("a", 2); get("c", 2)
    assert(loads == Vector("a", "b", "c"))
    get("b", 2)
    assert(loads == Vector("a", "b", "c", "b"))
    // a file without statistics is kept too (as one page), and so is not asked again
    cache.getOrLoad("file:/d", "none", 100)({ loads :+= "none"; None })
    assert(cache.getOrLoad("file:/d", "none", 100)({ loads :+= "none"; None }).isEmpty)
    assert(loads.count(_ == "none") == 1)
  }

  test("the same path in another dataset or of another size is another file; failures are not kept") {
    val cache = new StatisticsCache(maxPages = 100)
    var loads = 0
    def get(root: String, size: Long): Option[PageStatistics] =
      cache.getOrLoad(root, "data/x.lance", size)({ loads += 1; stats(1) })
    get("file:/d1", 10); get("file:/d2", 10); get("file:/d1", 11); get("file:/d1", 10)
    assert(loads == 3)
    val e = intercept[IllegalStateException](cache.getOrLoad("file:/d1", "bad", 1)(throw new IllegalStateException("corrupt")))
    assert(e.getMessage == "corrupt")
    assert(cache.getOrLoad("file:/d1", "bad", 1)(stats(3)) == stats(3))
  }

  test("tasks run in parallel give their results in order and rethrow the first failure as it was") {
    assert(StatisticsCache.inParallel((1 to 50).map(i => () => i * i)) == (1 to 50).map(i => i * i))
    val e = intercept[IllegalArgumentException](
      StatisticsCache.inParallel(Seq(() => 1, () => throw new IllegalArgumentException("file x: bad"), () => 3)))
    assert(e.getMessage == "file x: bad")
  }
}
